"""An agent's Memory Instructions (design §13 "Owner controls"): read, set, clear, roll back,
as ``/v1/agents/{a}/instructions`` and ``memoryctl instructions`` ask. Each change is a new
version, screened for secrets (``pipeline.owner.controls``), and names its audit entry: the
stage and scope type, never the text."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pipeline.formation.screening import guard_for
from pipeline.owner import controls
from pipeline.store.ports.ingest import IngestStore
from schemas.owner import Instruction
from schemas.settings import Settings
from usecases.audit import Audited


@dataclass(frozen=True)
class Instructions:
    """Every version by stage, scope and version; ``current`` the latest of each stage and
    scope type that holds a text (a cleared one holds none)."""
    history: list[Instruction]

    @property
    def current(self) -> list[Instruction]:
        latest = {(i.stage, i.scope): i for i in self.history}
        return [i for i in latest.values() if i.text]


@dataclass(frozen=True)
class Changed:
    """The instruction's new version, and the audit entry of the change."""
    verb: Literal["set", "clear", "rollback"]
    agent_id: str
    instruction: Instruction

    @property
    def audit(self) -> Audited:
        i = self.instruction
        return Audited(f"instructions.{self.verb}", self.agent_id, f"{i.stage}:{i.scope}",  # type: ignore[arg-type]
                       {"version": i.version})


def read(ingest: IngestStore, agent_id: str) -> Instructions:
    return Instructions(controls.list_instructions(ingest, agent_id))


def set_text(ingest: IngestStore, settings: Settings, agent_id: str, stage: str, scope: str, text: str, *, by: str,
             now: datetime, where: str = "text") -> Changed:
    """A new version holding ``text`` (a secret in it is refused, by kind, at ``where``)."""
    return Changed("set", agent_id, controls.set_instruction(ingest, guard_for(settings), agent_id, stage, scope,
                                                             text, by=by, now=now, where=where))


def clear(ingest: IngestStore, agent_id: str, stage: str, scope: str, *, by: str, now: datetime) -> Changed:
    """A new, empty version: the stage runs without an instruction of this scope type."""
    return Changed("clear", agent_id, controls.clear_instruction(ingest, agent_id, stage, scope, by=by, now=now))


def rollback(ingest: IngestStore, settings: Settings, agent_id: str, stage: str, scope: str, version: int, *,
             by: str, now: datetime) -> Changed:
    """A new version holding an earlier version's text."""
    return Changed("rollback", agent_id, controls.rollback_instruction(ingest, guard_for(settings), agent_id,
                                                                       stage, scope, version, by=by, now=now))
