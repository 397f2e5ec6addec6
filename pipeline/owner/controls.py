"""An owner's controls of one agent over a store (design §13): Memory Instructions and
pauses, read, changed and kept on the agent's ``AgentSettings``. The Python entry point; the
HTTP routes (``api.routes_owner``) and ``memoryctl instructions|pause|resume`` call these and
audit the change.

    from pipeline.owner import controls
    controls.set_instruction(store.ingest, guard, "juniper", "extraction", "all", "ignore: catering", by="me", now=now)
    controls.pause(store.ingest, "juniper", "session", session_id="s1", by="me", now=now)
"""

from __future__ import annotations

from datetime import datetime

from pipeline.formation.secrets import SecretGuard
from pipeline.owner import instructions as rules
from pipeline.owner import pauses
from pipeline.store.ports.ingest import IngestStore
from schemas.owner import Instruction, Pause


def _save(ingest: IngestStore, agent_id: str, change) -> object:
    """Apply ``change`` (settings -> (settings, result)) to the agent's settings and store them."""
    updated, result = change(ingest.get_agent_settings(agent_id))
    ingest.put_agent_settings(updated)
    return result


def list_instructions(ingest: IngestStore, agent_id: str) -> list[Instruction]:
    """Every version of every instruction of the agent, by stage, scope and version."""
    return sorted(ingest.get_agent_settings(agent_id).instructions, key=lambda i: (i.stage, i.scope, i.version))


def set_instruction(ingest: IngestStore, guard: SecretGuard, agent_id: str, stage: str, scope: str, text: str, *,
                    by: str, now: datetime, where: str = "text") -> Instruction:
    def change(agent):
        agent = rules.set_instruction(agent, stage, scope, text, guard=guard, by=by, now=now, where=where)
        return agent, rules.current(agent, stage, scope)
    return _save(ingest, agent_id, change)  # type: ignore[return-value]


def clear_instruction(ingest: IngestStore, agent_id: str, stage: str, scope: str, *, by: str,
                      now: datetime) -> Instruction:
    def change(agent):
        agent = rules.clear_instruction(agent, stage, scope, by=by, now=now)
        return agent, rules.current(agent, stage, scope)
    return _save(ingest, agent_id, change)  # type: ignore[return-value]


def rollback_instruction(ingest: IngestStore, guard: SecretGuard, agent_id: str, stage: str, scope: str,
                         version: int, *, by: str, now: datetime) -> Instruction:
    def change(agent):
        agent = rules.rollback_instruction(agent, stage, scope, version, guard=guard, by=by, now=now)
        return agent, rules.current(agent, stage, scope)
    return _save(ingest, agent_id, change)  # type: ignore[return-value]


def list_pauses(ingest: IngestStore, agent_id: str) -> list[Pause]:
    return list(ingest.get_agent_settings(agent_id).paused)


def pause(ingest: IngestStore, agent_id: str, target: str, *, session_id: str | None = None, by: str,
          now: datetime) -> Pause:
    """Pause formation for the whole agent (``all``), its agent memory or one session."""
    key = pauses.target_key(target, session_id)

    def change(agent):
        agent = pauses.pause(agent, key, by=by, now=now)
        return agent, next(p for p in agent.paused if p.scope_key == key)
    return _save(ingest, agent_id, change)  # type: ignore[return-value]


def resume(ingest: IngestStore, agent_id: str, target: str, *, session_id: str | None = None,
           now: datetime) -> Pause:
    """Resume formation; returns the pause that ended (its start names the window)."""
    key = pauses.target_key(target, session_id)
    return _save(ingest, agent_id, lambda agent: pauses.resume(agent, key, now=now))  # type: ignore[return-value]
