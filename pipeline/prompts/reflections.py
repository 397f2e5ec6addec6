"""extract_reflections: prompt builder and answer model (design §5.4), hierarchical."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from pipeline.conversation import is_group_chat, message_inputs
from pipeline.errors import InvalidInput
from pipeline.llm.port import LLMRequest
from pipeline.prompts.consolidation import blob_memory
from schemas.documents import StoredMessage


class ReflectionsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: list[str] = Field(description="Agent-level reflections, each at most 35 words.")
    user: list[str] = Field(description="User-level reflections not already held at agent level.")
    session: list[str] = Field(description="Session-level reflections held by neither level above.")


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
- is grounded in the conversation: invent nothing.
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


def reflection_levels(messages: Sequence[StoredMessage], scopes: Sequence[str]) -> list[str]:
    """The levels formed, in hierarchical order: the enabled ones, ``user`` never in a group
    chat, and ``session`` always (design §1)."""
    unknown = sorted(set(scopes) - set(LEVELS))
    if unknown:
        raise InvalidInput("scopes", f"unknown reflection levels {unknown}; expected among {list(LEVELS)}")
    group = is_group_chat(messages)
    return [s for s in LEVELS if s == "session" or (s in scopes and not (s == "user" and group))]


def build_reflections_request(
    conversation_text: str,
    messages: Sequence[StoredMessage],
    *,
    scopes: Sequence[str],
    blobs: Mapping[str, str],
    unabsorbed: Mapping[str, Sequence[str]],
    new_facts: Sequence[str],
    model: str,
    word_limit: int = 35,
    user_names: Mapping[str, str] | None = None,
) -> LLMRequest[ReflectionsAnswer]:
    """The ``extract_reflections`` call (design §5.4), hierarchical agent -> user -> session.

    ``scopes`` lists the enabled levels among agent/user/session; ``user`` is dropped in a
    group chat and ``session`` is always formed (see ``reflection_levels``). ``blobs`` maps a
    level to its current consolidated blob text, ``unabsorbed`` a level to its buffered
    reflections, ``new_facts`` the texts of the facts this run formed, ``user_names`` user id
    -> name for users the events do not name. Levels that are not formed are left out of the
    prompt and of ``inputs``; blobs are shown without a provider's ``SOURCE`` note.

    ``inputs``: ``messages`` (``conversation.message_inputs``), ``scopes`` (the formed levels,
    in order), ``group_chat``, ``blobs``, ``unabsorbed``, ``new_facts``, ``word_limit``.
    """
    levels = reflection_levels(messages, scopes)
    kept_blobs = {s: blob_memory(blobs.get(s) or "") for s in levels}
    kept_blobs = {s: text for s, text in kept_blobs.items() if text}
    kept_buffer = {s: [r for r in unabsorbed.get(s, ())] for s in levels if unabsorbed.get(s)}
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
        + f"\nConversation:\n<conversation>\n{conversation_text}\n</conversation>\n\n"
        + f"Return the new reflections for the levels {', '.join(levels)}."
    )
    return LLMRequest(
        operation=OPERATION,
        model=model,
        system=_SYSTEM.format(levels="\n".join(_LEVEL_RULES[s] for s in levels), word_limit=word_limit),
        prompt=prompt,
        response_model=ReflectionsAnswer,
        inputs={
            "messages": message_inputs(messages, user_names),
            "scopes": levels,
            "group_chat": is_group_chat(messages),
            "blobs": kept_blobs,
            "unabsorbed": kept_buffer,
            "new_facts": list(new_facts),
            "word_limit": word_limit,
        },
    )
