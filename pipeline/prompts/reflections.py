"""extract_reflections: prompt builder and answer model (design §5.4), hierarchical.

Each reflection cites the messages it rests on by integer alias (design §11 "Provenance and
erasure"), as the dedup stage names facts: the conversation is shown with ``#n`` before each
message, ``n`` its index in ``inputs["messages"]`` (``alias_ids`` maps them back to message
ids); ``check_sources`` rejects an answer that cites none or one outside the conversation. The
senders of the cited messages are the reflection's ``source_user_ids``, so erasing one person
of a group chat removes what rests on them and keeps what the others said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.conversation import is_group_chat, message_inputs, ordered, render_conversation
from pipeline.errors import InvalidInput, InvalidLLMAnswer
from pipeline.llm.port import LLMRequest
from pipeline.prompts.consolidation import blob_memory
from pipeline.prompts.guidance import NONE, Guidance, owner_block
from schemas.documents import StoredMessage


class ReflectionItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The reflection, one sentence of at most 35 words.")
    sources: list[int] = Field(
        description="Aliases (the #n before each conversation line) of the messages it rests on; at least one."
    )


class ReflectionsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: list[ReflectionItem] = Field(description="Agent-level reflections, each at most 35 words.")
    user: list[ReflectionItem] = Field(description="User-level reflections not already held at agent level.")
    session: list[ReflectionItem] = Field(description="Session-level reflections held by neither level above.")

    def texts(self, level: str) -> list[str]:
        """The texts of one level, in order."""
        return [item.text for item in getattr(self, level)]


@lru_cache(maxsize=256)
def cited_answer(count: int) -> type[ReflectionsAnswer]:
    """``ReflectionsAnswer`` whose items cite 1 to ``count`` aliases, each in 0..count-1.

    A server that holds its answer to the schema (``json_schema`` mode) then cannot answer what
    ``check_sources`` would send back: an uncited reflection, or an alias outside the
    conversation. Without the bounds a small model on llama.cpp counted its sources 1, 2, 3, ...
    until the output token limit cut the answer."""
    last = max(count - 1, 0)
    item = create_model(
        "ReflectionItem", __base__=ReflectionItem,
        sources=(list[Annotated[int, Field(ge=0, le=last)]],
                 Field(min_length=1, max_length=last + 1, description=ReflectionItem.model_fields["sources"].description)),
    )
    levels = {level: (list[item], Field(description=ReflectionsAnswer.model_fields[level].description))
              for level in LEVELS}
    return create_model("ReflectionsAnswer", __base__=ReflectionsAnswer, **levels)


# --- prompt builder ---------------------------------------------------------------------------

OPERATION = "extract_reflections"
LEVELS: tuple[str, ...] = ("agent", "user", "session")

_SYSTEM = """\
You form REFLECTIONS for the long-term memory of a chat agent: interpreted, behavioural
memories that shape how the agent acts, as opposed to plain facts (which are already stored).

Work top-down through the levels you are given, in this order, and put each insight at the
highest level where it belongs. A lower level holds only what the levels above do not.
{levels}

Each reflection:
- is one self-contained sentence of at most {word_limit} words, naming who it is about;
- is new: it does not repeat a fact formed from this conversation, a line of a current memory
  blob or a reflection already waiting in the buffer (all shown below); if it refines or
  corrects one of them, state the new version;
- is grounded in the conversation: invent nothing;
- cites in "sources" the alias of every message it rests on (the #n before each conversation
  line; only those shown), at least one: the person who said it, not everyone present.
Return empty lists for levels with nothing new, and for every level not listed above.
"""

_LEVEL_RULES = {
    "agent": (
        '- "agent" (shared by every conversation of this agent, with every user): projects and '
        "milestones; learnings about users and the community; changes in the state of the world; "
        "the agent's persona and style."
    ),
    "user": (
        '- "user" (this one user, in every session with this agent): the user\'s rules and '
        "preferences, skills, interests, goals and personal projects."
    ),
    "session": (
        '- "session" (this conversation only): the goals of this conversation, assets to pin '
        "(URLs, images), corrections and instructions for this session, the state of the task."
    ),
}


def reflection_levels(messages: Sequence[StoredMessage], scopes: Sequence[str], *, session: bool = True) -> list[str]:
    """The levels formed, in hierarchical order: the enabled ones, ``user`` never in a group
    chat, and ``session`` always (design §1) unless the owner paused it (``session`` False,
    design §13)."""
    unknown = sorted(set(scopes) - set(LEVELS))
    if unknown:
        raise InvalidInput("scopes", f"unknown reflection levels {unknown}; expected among {list(LEVELS)}")
    group = is_group_chat(messages)
    return [s for s in LEVELS if (s == "session" and session) or
            (s != "session" and s in scopes and not (s == "user" and group))]


def aliased_conversation(messages: Sequence[StoredMessage], user_names: Mapping[str, str] | None = None) -> str:
    """The conversation text (``render_conversation``) with ``#n`` before each message, ``n``
    its index in ``ordered(messages)``, the order of ``inputs["messages"]``."""
    return "\n".join(f"#{i} {render_conversation([m], user_names)}" for i, m in enumerate(ordered(messages)))


def alias_ids(messages: Sequence[StoredMessage]) -> list[str]:
    """The message id of each alias: ``alias_ids(messages)[n]`` is the message shown as ``#n``."""
    return [m.message_id for m in ordered(messages)]


def check_sources(answer: ReflectionsAnswer, message_ids: Sequence[str]) -> None:
    """Raise ``InvalidLLMAnswer`` (the call is asked again) when a reflection cites no message
    or an alias outside ``message_ids`` (``alias_ids``), as a dedup decision naming a fact
    outside its candidates is rejected."""
    problems: list[str] = []
    for level in LEVELS:
        for i, item in enumerate(getattr(answer, level)):
            outside = sorted({a for a in item.sources if not 0 <= a < len(message_ids)})
            if outside:
                problems.append(f"{level}[{i}] cites {outside}, not aliases of this conversation "
                                f"(0..{len(message_ids) - 1})")
            elif not item.sources and item.text.strip():
                problems.append(f"{level}[{i}] cites no message")
    if problems:
        raise InvalidLLMAnswer("extract_reflections answer rejected: " + "; ".join(problems))


def build_reflections_request(
    messages: Sequence[StoredMessage],
    *,
    scopes: Sequence[str],
    blobs: Mapping[str, str],
    unabsorbed: Mapping[str, Sequence[str]],
    new_facts: Sequence[str],
    model: str,
    word_limit: int = 35,
    user_names: Mapping[str, str] | None = None,
    agent_name: str | None = None,
    guidance: Guidance = NONE,
    session: bool = True,
) -> LLMRequest[ReflectionsAnswer]:
    """The ``extract_reflections`` call (design §5.4), hierarchical agent -> user -> session.

    The conversation is ``aliased_conversation(messages, user_names)``.
    ``scopes`` lists the enabled levels among agent/user/session; ``user`` is dropped in a
    group chat and ``session`` is formed unless ``session`` is False (see ``reflection_levels``). ``blobs`` maps a
    level to its current consolidated blob text, ``unabsorbed`` a level to its buffered
    reflections, ``new_facts`` the texts of the facts this run formed, ``user_names`` user id
    -> name for users the events do not name, ``agent_name`` the agent's display name (agent
    settings, else the events'). Levels that are not formed are left out of the
    prompt and of ``inputs``; blobs are shown without a provider's ``SOURCE`` note.

    ``guidance``: the owner's Memory Instructions for this call (``pipeline.prompts.guidance``).

    ``inputs``: ``messages`` (``conversation.message_inputs``), ``scopes`` (the formed levels,
    in order), ``group_chat``, ``blobs``, ``unabsorbed``, ``new_facts``, ``word_limit``,
    ``agent_name``, and ``guidance`` (the focus and ignore topics per level).
    """
    levels = reflection_levels(messages, scopes, session=session)
    kept_blobs = {s: blob_memory(blobs.get(s) or "") for s in levels}
    kept_blobs = {s: text for s, text in kept_blobs.items() if text}
    kept_buffer = {s: [r for r in unabsorbed.get(s, ())] for s in levels if unabsorbed.get(s)}
    prompt = _prompt(messages, levels, kept_blobs, kept_buffer, new_facts, agent_name, user_names)
    return LLMRequest(
        operation=OPERATION,
        model=model,
        system=_SYSTEM.format(levels="\n".join(_LEVEL_RULES[s] for s in levels), word_limit=word_limit)
        + owner_block(guidance.text),
        prompt=prompt,
        response_model=cited_answer(len(messages)),
        inputs={
            "messages": message_inputs(messages, user_names),
            "scopes": levels,
            "group_chat": is_group_chat(messages),
            "blobs": kept_blobs,
            "unabsorbed": kept_buffer,
            "new_facts": list(new_facts),
            "word_limit": word_limit,
            "agent_name": agent_name,
            "guidance": guidance.inputs(),
        },
    )


def _prompt(messages: Sequence[StoredMessage], levels: Sequence[str], kept_blobs: Mapping[str, str],
            kept_buffer: Mapping[str, Sequence[str]], new_facts: Sequence[str], agent_name: str | None,
            user_names: Mapping[str, str] | None) -> str:
    """What the agent remembers per formed level, the run's facts, the aliased conversation."""
    sections = []
    for level in levels:
        parts = [f'== {level} level ==']
        parts.append("Current blob:\n" + (kept_blobs.get(level) or "(empty)"))
        buffered = kept_buffer.get(level, [])
        parts.append("Buffered reflections:\n" + ("\n".join(f"- {r}" for r in buffered) or "(none)"))
        sections.append("\n".join(parts))
    facts_block = "\n".join(f"- {f}" for f in new_facts) or "(none)"
    omitted = [s for s in LEVELS if s not in levels]
    omitted_line = (
        f"\nDo not form {' or '.join(omitted)} reflections here: return empty lists for them.\n" if omitted else ""
    )
    prompt = (
        "What the agent already remembers, per level:\n\n"
        + "\n\n".join(sections)
        + f"\n\nFacts formed from this conversation (do not repeat them):\n{facts_block}\n"
        + omitted_line
        + (f"\nThe agent is called {agent_name}: write its name where the conversation says \"you\".\n"
           if agent_name else "")
        + f"\nConversation (#n is each message's alias):\n<conversation>\n"
        + f"{aliased_conversation(messages, user_names)}\n</conversation>\n\n"
        + f"Return the new reflections for the levels {', '.join(levels)}, each with its sources."
    )
    return prompt
