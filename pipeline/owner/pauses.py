"""Pause and resume (design §13): an owner stops formation for the whole agent, its agent
memory or one session, and starts it again. Pure functions over ``AgentSettings``.

A paused scope keeps its content and its events; formation runs still claim and finish the
messages that arrive meanwhile (the session's watermark advances, so nothing is formed twice)
but plan no work for the paused scope (``formation.scopes.plan_scopes``): no facts, no
reflections, no consolidation. Users pause their own user memory with their own switch
(``Store.set_user_memory``), which this mirrors.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Literal

from pipeline.errors import InvalidInput
from schemas.documents import AgentSettings, scope_key
from schemas.owner import WHOLE_AGENT, Pause

Target = Literal["all", "agent", "session"]
TARGETS: tuple[str, ...] = ("all", "agent", "session")


def target_key(target: str, session_id: str | None = None) -> str:
    """The key a pause names: ``*`` (the whole agent), ``agent`` or ``session:<id>``."""
    if target not in TARGETS:
        raise InvalidInput("target", f"unknown target {target!r}: choose among {', '.join(TARGETS)}")
    if (target == "session") != bool(session_id):
        raise InvalidInput("session_id", "a session pause names its session_id; other targets name none")
    if target == "all":
        return WHOLE_AGENT
    return scope_key(target, session_id=session_id)  # type: ignore[arg-type]


def paused_keys(agent: AgentSettings) -> set[str]:
    return {p.scope_key for p in agent.paused}


def is_paused(paused: Collection[str], key: str) -> bool:
    """Whether formation for scope ``key`` is paused: the key itself, or the whole agent."""
    return WHOLE_AGENT in paused or key in paused


def pause(agent: AgentSettings, key: str, *, by: str, now: datetime) -> AgentSettings:
    """The settings with ``key`` paused; pausing a paused key keeps its first pause."""
    if key in paused_keys(agent):
        return agent
    return agent.model_copy(update={"paused": [*agent.paused, Pause(scope_key=key, paused_at=now, paused_by=by)],
                                    "updated_at": now})


def resume(agent: AgentSettings, key: str, *, now: datetime) -> tuple[AgentSettings, Pause]:
    """The settings without the pause of ``key``, and that pause (when it began)."""
    found = next((p for p in agent.paused if p.scope_key == key), None)
    if found is None:
        raise InvalidInput("target", f"{'the whole agent' if key == WHOLE_AGENT else key} is not paused")
    return agent.model_copy(update={"paused": [p for p in agent.paused if p.scope_key != key],
                                    "updated_at": now}), found
