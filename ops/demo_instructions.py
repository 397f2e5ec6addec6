"""The demo's look at Memory Instructions (design §13): what one instruction changes in the
next extraction of a session, shown without touching the demo's store.

The sample's group session is extracted twice by the same path a run takes (the facts
prompt builder with the agent's guidance, then the configured LLM: the offline rules by
default), once as the agent stands and once after ``memoryctl instructions set`` would have
stored the instruction; the facts only the first keeps are what the instruction leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from pipeline.conversation import render_conversation
from pipeline.formation.screening import guard_for
from pipeline.ingest import to_stored_message
from pipeline.owner.instructions import guidance, set_instruction
from pipeline.prompts.facts import build_facts_request
from schemas.documents import AgentSettings
from schemas.events import MessageAdded, parse_event

SESSION = "s2-launch-team"
INSTRUCTION = "ignore: catering"


def _facts(llm, settings, agent: AgentSettings, messages) -> list[str]:
    names = {m.sender_id: m.sender_name for m in messages if m.sender_id and m.sender_name}
    request = build_facts_request(render_conversation(messages, names), messages, user_scope=True, agent_scope=True,
                                  agent_name=messages[0].agent_name, user_names=names, model="demo",
                                  word_limit=settings.fact_word_limit,
                                  guidance=guidance(agent, "extraction", ["agent", "user"]))
    return [f.text for f in llm.complete(request).parsed.facts]


def instruction_effect(events: Sequence[dict], llm, settings, *, session_id: str = SESSION,
                       instruction: str = INSTRUCTION) -> tuple[list[str], list[str]]:
    """(the facts the session's extraction keeps without the instruction, those it leaves
    out with it)."""
    now = datetime.now(timezone.utc)
    parsed = [parse_event(e, max_message_bytes=settings.max_message_bytes) for e in events
              if e.get("session_id") == session_id]
    messages = [to_stored_message(e, now) for e in parsed if isinstance(e, MessageAdded)]
    agent = AgentSettings(agent_id=messages[0].agent_id)
    before = _facts(llm, settings, agent, messages)
    guided = set_instruction(agent, "extraction", "all", instruction, guard=guard_for(settings), by="demo", now=now)
    after = set(_facts(llm, settings, guided, messages))
    return before, [f for f in before if f not in after]


def describe(before: list[str], left_out: list[str], instruction: str = INSTRUCTION) -> str:
    lines = [f"\nMemory Instructions (docs/owner.md): with `{instruction}` set for extraction, the next run over "
             f"session {SESSION} keeps {len(before) - len(left_out)} of its {len(before)} facts; it leaves out:"]
    lines += [f"  - {text}" for text in left_out] or ["  (nothing)"]
    lines.append(f"  try it: memoryctl instructions set <agent> --stage extraction --text '{instruction}'")
    return "\n".join(lines)
