"""Pausing and resuming formation (design §13 "Owner controls") for a whole agent, its agent
memory or one session, as ``/v1/agents/{a}/pause|resume`` and ``memoryctl pause|resume`` ask:
content and events are kept while paused; a resume may backfill, forming from the messages of
the pause. Each change names its audit entry (``pipeline.owner.controls`` keeps the state)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from pipeline.owner import controls
from pipeline.owner.backfill import backfill
from pipeline.store.port import Store
from pipeline.store.ports.ingest import IngestStore
from pipeline.sweep import start_runs
from schemas.owner import Pause
from usecases.audit import Audited


@dataclass(frozen=True)
class Paused:
    agent_id: str
    target: str
    pause: Pause

    @property
    def audit(self) -> Audited:
        return Audited("memory.pause", self.agent_id, self.target)


@dataclass(frozen=True)
class Resumed:
    """The pause that ended (its start names the window), and the backfill runs started."""
    agent_id: str
    target: str
    ended: Pause
    runs: list[str]

    @property
    def audit(self) -> Audited:
        return Audited("memory.resume", self.agent_id, self.target, {"backfill_runs": len(self.runs)})


def paused(ingest: IngestStore, agent_id: str) -> list[Pause]:
    return controls.list_pauses(ingest, agent_id)


def pause(ingest: IngestStore, agent_id: str, target: str, *, session_id: str | None = None, by: str,
          now: datetime) -> Paused:
    """Pause formation for the whole agent (``all``), its agent memory or one session."""
    return Paused(agent_id, target, controls.pause(ingest, agent_id, target, session_id=session_id, by=by,
                                                   now=now))


def resume(store: Store, agent_id: str, target: str, *, session_id: str | None = None, now: datetime,
           backfill_lease_s: float | None, start: Callable[[str], None]) -> Resumed:
    """Resume formation; with ``backfill_lease_s``, claim runs over the messages of the pause
    and ``start`` each (a run the broker refuses is failed, retried by beat)."""
    ended = controls.resume(store.ingest, agent_id, target, session_id=session_id, now=now)
    runs = backfill(store.runs, agent_id, ended, now, backfill_lease_s) if backfill_lease_s is not None else []
    start_runs(store.runs, runs, start, now)
    return Resumed(agent_id, target, ended, runs)
