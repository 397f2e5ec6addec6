"""Which memory scopes a formation run may write (design §1). Pure.

- ``user`` scope: the agent's ``user_memory_enabled`` is on, the session has exactly one
  human, and that human has not switched their own user memory off with this agent (design
  §12, ``Store.user_memory_off``). A group chat forms no user-scoped memory at all.
- ``agent`` scope: the agent's ``agent_memory_enabled`` is on.
- ``session`` scope: reflections only, always formed, whatever the toggles.
- Facts use ``user`` and ``agent`` only; with neither enabled the facts LLM call is skipped.
- A scope the owner paused (design §13, ``pipeline.owner.pauses``: the whole agent, its agent
  memory, one session) is left out like a scope switched off: its content stays, nothing new.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pipeline.owner.pauses import is_paused, paused_keys
from schemas.documents import AgentSettings, scope_key

REFLECTION_ORDER = ("agent", "user", "session")


@dataclass(frozen=True)
class ScopePlan:
    agent_id: str
    session_id: str
    user_id: str | None          # the one human of a one-to-one chat, else None
    group_chat: bool
    fact_scopes: tuple[str, ...]        # subset of ("agent", "user"), in that order
    reflection_scopes: tuple[str, ...]  # subset of REFLECTION_ORDER, "session" always

    @property
    def extract_facts(self) -> bool:
        """False when both agent toggles are off (or only user scope is on in a group chat)."""
        return bool(self.fact_scopes)

    def key(self, scope: str) -> str:
        return scope_key(scope, user_id=self.user_id, session_id=self.session_id)  # type: ignore[arg-type]

    @property
    def reflection_keys(self) -> dict[str, str]:
        """scope -> scope key, in hierarchical order."""
        return {scope: self.key(scope) for scope in self.reflection_scopes}

    @property
    def enabled(self) -> list[str]:
        """Every enabled scope name, as recorded on the run's ``scopes_enabled``."""
        return list(self.reflection_scopes)


def plan_scopes(
    agent: AgentSettings, session_id: str, user_ids: Sequence[str], group_chat: bool,
    user_memory_off: Collection[str] = (),
) -> ScopePlan:
    """The scopes one run may form, from the agent's toggles, the session's humans and the
    humans who switched their own user memory off with this agent (``user_memory_off``) and
    what the owner paused (``agent.paused``)."""
    humans = list(dict.fromkeys(u for u in user_ids if u))
    group = group_chat or len(humans) > 1
    user_id = humans[0] if len(humans) == 1 and not group else None
    paused = paused_keys(agent)
    user_on = (agent.user_memory_enabled and user_id is not None and user_id not in user_memory_off
               and not is_paused(paused, scope_key("user", user_id=user_id)))
    agent_on = agent.agent_memory_enabled and not is_paused(paused, "agent")
    session_on = not is_paused(paused, scope_key("session", session_id=session_id))
    facts = tuple(s for s, on in (("agent", agent_on), ("user", user_on)) if on)
    reflections = tuple(
        s for s, on in (("agent", agent_on), ("user", user_on), ("session", session_on)) if on
    )
    return ScopePlan(
        agent_id=agent.agent_id, session_id=session_id, user_id=user_id, group_chat=group,
        fact_scopes=facts, reflection_scopes=reflections,
    )


def restricted(plan: ScopePlan, only: Collection[str]) -> ScopePlan:
    """``plan`` keeping only the scope types ``only`` names (none given: unchanged), as a
    backfill run forms a resumed scope alone (design §13)."""
    if not only:
        return plan
    return ScopePlan(agent_id=plan.agent_id, session_id=plan.session_id, user_id=plan.user_id,
                     group_chat=plan.group_chat, fact_scopes=tuple(s for s in plan.fact_scopes if s in only),
                     reflection_scopes=tuple(s for s in plan.reflection_scopes if s in only))


def plan_to_dict(plan: ScopePlan) -> dict:
    return {
        "agent_id": plan.agent_id, "session_id": plan.session_id, "user_id": plan.user_id,
        "group_chat": plan.group_chat, "fact_scopes": list(plan.fact_scopes),
        "reflection_scopes": list(plan.reflection_scopes),
    }


def plan_from_dict(data: dict) -> ScopePlan:
    """The plan a run recorded in its first stage (later stages never re-read the toggles)."""
    return ScopePlan(
        agent_id=data["agent_id"], session_id=data["session_id"], user_id=data.get("user_id"),
        group_chat=bool(data["group_chat"]), fact_scopes=tuple(data["fact_scopes"]),
        reflection_scopes=tuple(data["reflection_scopes"]),
    )
