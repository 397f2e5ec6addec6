"""extract_facts: prompt builder and answer model (design §5.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from pipeline.conversation import humans, is_group_chat, message_inputs
from pipeline.errors import InvalidInput
from pipeline.llm.port import LLMRequest
from pipeline.prompts.guidance import NONE, Guidance, owner_block
from schemas.documents import StoredMessage


#: an ISO 8601 date, or a date-time with its offset (``expires_at`` of the answer's schema)
EXPIRY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2}))?$"

#: how many categories an answer may file one fact under, and the shape of a name (``pipeline.owner.categories``)
MAX_FILED = 5
CATEGORY_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"


class ExtractedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="One atomic, objective, enduring fact, at most 30 words.")
    scope: Literal["user", "agent"] = Field(
        description="user: about the human in this one-to-one chat; agent: true for every user of this agent."
    )
    # a string, not a date: a malformed one drops the expiry, never the fact (``facts.filter_facts``).
    # The schema sent still states the shape (a pattern, which OpenAI's strict schemas, Gemini's
    # response_json_schema and llama.cpp's grammar all take), so a constrained decoder writes a
    # date there instead of running free until the token limit cuts the answer off.
    expires_at: Annotated[str, WithJsonSchema({"type": "string", "pattern": EXPIRY_PATTERN})] | None = Field(
        default=None,
        description="Only when the statement is bound to a deadline or end date (\"by March 10\", "
        "\"until Friday\"): that date as YYYY-MM-DD (or an ISO 8601 date-time with its timezone), "
        "resolved against the message date; otherwise null.",
    )


class FiledFact(ExtractedFact):
    """A fact with the agent's categories it is in (design §13 "Categories and metadata"):
    asked for only when the agent has categories, so an agent without any is sent the schema
    and prompt it had before."""

    # The schema sent bounds the list (at most MAX_FILED names, each a category name's shape:
    # ``pattern`` and ``maxItems`` are among the keywords OpenAI's strict mode supports,
    # https://platform.openai.com/docs/guides/structured-outputs#supported-properties, and
    # Gemini's responseJsonSchema and llama.cpp's grammar take them), so a constrained decoder
    # cannot run on until the token limit; the answer is not held to it: a name outside the list
    # is dropped alone (``facts.filter_facts``). No default is sent (pydantic writes none for a
    # factory): strict mode requires it like every property; an answer without it files nothing.
    categories: Annotated[list[str], WithJsonSchema({
        "type": "array", "items": {"type": "string", "pattern": CATEGORY_PATTERN}, "maxItems": MAX_FILED,
    })] = Field(
        default_factory=list,
        description="The categories of the listed ones this fact belongs to, by their exact names; [] for none.",
    )


class FactsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[ExtractedFact]


class FiledFactsAnswer(FactsAnswer):
    facts: list[FiledFact]


# --- prompt builder ---------------------------------------------------------------------------

OPERATION = "extract_facts"

_SYSTEM = """\
You extract FACTS for the long-term memory of a chat agent.

A fact is one atomic, objective statement that answers a who / what / where / when question,
for example "Alice's email is alice@example.com" or "The Mars Festival takes place on 2026-06-14
in Tucson". Every fact you return must be:
- atomic: one piece of information; split compound statements;
- objective: stated by a participant as true, not an opinion, guess or joke;
- enduring: still true in a month or more;
- specific: it names its subject and carries a concrete value (a name, place, number, date,
  email, URL, amount); never "the user", "they" or "it" where a name is known;
- searchable and self-contained: understandable with no conversation around it, fine to
  forget until someone searches for it;
- written in the third person, at most {word_limit} words, in the language of the conversation.

These are NOT facts; leave them out:
- preferences, habits, rules and behaviour ("prefers short answers", "always wants Spanish"):
  another stage keeps those as reflections;
- the current context and ephemeral state ("is tired today", "is on the train now",
  what is being asked right now);
- opinions, feelings and small talk, questions, greetings, thanks;
- anything the assistant only suggested or asked, unless the user confirmed it.

Resolve relative dates ("next Friday") against the message timestamps and write the date.
A fact bound to a deadline or an end date ("the caterer needs the count by March 10", "the
venue is booked until June 2") is kept with that date in expires_at; every other fact has
expires_at null.
Return each fact at most once. Return an empty list when the conversation holds no fact.
"""

_FILING = """
File each fact under the categories it belongs to, only from the list given with the
conversation, by their exact names (none, one or several); a fact that fits none has [].
"""

_SCOPE_RULES = {
    "user": '- "user": a fact about {who} (the one human in this chat): identity, contacts, '
    "family, work, places, dates, possessions, personal history.",
    "agent": '- "agent": a fact true for every user of this agent: shared projects, events, '
    "organisations, places, plans and the state of the world discussed here.",
}


def fact_scopes(messages: Sequence[StoredMessage], *, user_scope: bool, agent_scope: bool) -> list[str]:
    """The fact scopes an extraction may use: ``user`` only when enabled and not a group chat."""
    scopes = []
    if user_scope and not is_group_chat(messages):
        scopes.append("user")
    if agent_scope:
        scopes.append("agent")
    return scopes


def build_facts_request(
    conversation_text: str,
    messages: Sequence[StoredMessage],
    *,
    user_scope: bool,
    agent_scope: bool,
    agent_name: str | None,
    user_names: Mapping[str, str],
    model: str,
    word_limit: int = 30,
    guidance: Guidance = NONE,
    categories: Sequence[str] = (),
) -> LLMRequest[FactsAnswer]:
    """The ``extract_facts`` call for one claimed message range (design §5.1).

    ``conversation_text`` is ``pipeline.conversation.render_conversation(messages)``;
    ``user_scope``/``agent_scope`` are the agent's toggles; ``user_names`` maps user id -> name.
    User scope is offered only when enabled and ``messages`` are not a group chat (checked
    here too, from the messages). Raises ``InvalidInput`` when no scope is left: the caller
    skips the call then (use ``fact_scopes`` to know beforehand).

    ``guidance``: the owner's Memory Instructions for this call (``pipeline.prompts.guidance``).
    ``categories``: the agent's category list (``pipeline.owner.categories``), listed in the
    prompt; an answer's other names are dropped by ``formation.facts.filter_facts``.

    ``inputs``: ``messages`` (``conversation.message_inputs``), ``scopes`` (the allowed fact
    scopes), ``group_chat``, ``agent_name``, ``user_names``, ``word_limit``, ``guidance`` (the
    focus and ignore topics per scope), ``categories``.
    """
    scopes = fact_scopes(messages, user_scope=user_scope, agent_scope=agent_scope)
    if not scopes:
        raise InvalidInput("scopes", "no fact scope is enabled for this conversation; skip the extract_facts call")
    group = is_group_chat(messages)
    spoken = {m.sender_id: m.sender_name for m in messages if m.sender_id and (m.sender_name or "").strip()}
    people = [user_names.get(u) or spoken.get(u) or u for u in humans(messages)]
    who = people[0] if len(people) == 1 else "the user"
    prompt = _prompt(conversation_text, agent_name, people, group, _allowed(scopes, group, who), categories)
    return LLMRequest(
        operation=OPERATION,
        model=model,
        system=_SYSTEM.format(word_limit=word_limit) + (_FILING if categories else "") + owner_block(guidance.text),
        prompt=prompt,
        response_model=FiledFactsAnswer if categories else FactsAnswer,
        inputs={
            "messages": message_inputs(messages, user_names),
            "scopes": scopes,
            "group_chat": group,
            "agent_name": agent_name,
            "user_names": dict(user_names),
            "word_limit": word_limit,
            "guidance": guidance.inputs(),
            "categories": list(categories),
        },
    )


def _prompt(conversation_text: str, agent_name: str | None, people: Sequence[str], group: bool, allowed: str,
            categories: Sequence[str]) -> str:
    """The user turn: who is speaking, the scopes allowed, the categories, the conversation."""
    agent_line = f"The agent is called {agent_name}." if agent_name else "The agent has no display name."
    people_line = ", ".join(people) if people else "no named human"
    return (
        f"{agent_line}\nHumans in this conversation: {people_line}"
        f"{' (a group chat)' if group else ''}.\n\n"
        f"Scopes you may use:\n{allowed}\n\n"
        + (f"Categories you may file a fact under: {', '.join(categories)}.\n\n" if categories else "") +
        f"Conversation:\n<conversation>\n{conversation_text}\n</conversation>\n\n"
        f"Return the facts of this conversation, each with its scope."
    )


def _allowed(scopes: Sequence[str], group: bool, who: str) -> str:
    """The prompt's rules for the scopes it may use, and why it may not use the others."""
    allowed = "\n".join(_SCOPE_RULES[s].format(who=who) for s in scopes)
    if "user" not in scopes:
        why = "this is a group chat" if group else "user memory is off for this agent"
        allowed += f'\n- Never use scope "user" ({why}): leave out facts that are only about one person.'
    if "agent" not in scopes:
        allowed += '\n- Never use scope "agent" (agent memory is off): leave out facts that are not about the user.'
    return allowed
