"""The run port (design §7): claims, formation runs, their stages and leases.

What the trigger, the stage runner and the stale-run sweep need; part of
``pipeline.store.port.Store``. Methods that change a run raise ``KeyError`` for an unknown run
id (``renew_run_lease`` returns False and ``reopen_run`` None instead).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pipeline.trigger import ClaimRule
from schemas.documents import FormationRun, StageRecord


class RunStore(Protocol):
    """Claims of a session's unformed range, and the runs that form them."""

    @abc.abstractmethod
    def try_claim(
        self, session_id: str, rule: ClaimRule, run: FormationRun, now: datetime, lease_s: float
    ) -> FormationRun | None:
        """Atomically claim the unclaimed range of a session for a new run, if ``rule`` holds.

        On success: the session's ``claimed_through`` becomes its ``last_seq``, its
        ``messages_since`` / ``tokens_since`` drop to 0, ``active_run_id`` / ``lease_expires_at``
        are set, and ``run`` is stored with ``seq_from = old claimed_through + 1``,
        ``seq_to = last_seq``, ``status="claimed"``, the lease, and the session's users, group
        flag and tier filled in. Returns the stored run. Exactly one of any number of racing
        callers wins a given range; the others get None, as does a ``run`` of another agent
        than the session's.
        """

    @abc.abstractmethod
    def insert_run(self, run: FormationRun) -> bool:
        """Store a run over a range already formed once (a backfill, design §13), as given:
        no session claim is taken or moved. False if a run with its id exists."""

    @abc.abstractmethod
    def get_run(self, run_id: str) -> FormationRun | None: ...

    def run_status(self, run_id: str) -> str | None:
        """The run's status alone, None for an unknown run: what a stage checks again after
        its model calls (design §11), without reading the whole run and its stage outputs.
        Adapters read the one field; this default reads the run."""
        run = self.get_run(run_id)
        return None if run is None else run.status

    @abc.abstractmethod
    def update_run_fields(self, run_id: str, **fields: object) -> None:
        """Set top-level run fields (status, scopes_enabled, models, error, totals, ...)."""

    @abc.abstractmethod
    def renew_run_lease(self, run_id: str, now: datetime, lease_s: float) -> bool:
        """Extend a claimed/running run's lease (and the session's). False if the run is no
        longer active (done, dead, failed) so the caller must stop."""

    @abc.abstractmethod
    def start_stage(self, run_id: str, stage: str, now: datetime) -> StageRecord:
        """Mark a stage running (attempts + 1, started_at) unless it is already done; return
        the stage record as it now stands (a done stage is returned unchanged)."""

    def begin_stage(
        self, run_id: str, stage: str, now: datetime, lease_s: float
    ) -> tuple[FormationRun, StageRecord] | None:
        """``renew_run_lease`` then ``start_stage``: None when the run is no longer active (or
        gone), else the run as it now stands (this stage's record included) and that record.
        Adapters may do it in one round trip; this default takes three."""
        if not self.renew_run_lease(run_id, now, lease_s):
            return None
        record = self.start_stage(run_id, stage, now)
        run = self.get_run(run_id)
        return None if run is None else (run, record)

    @abc.abstractmethod
    def complete_stage(self, run_id: str, stage: str, record: StageRecord) -> bool:
        """Store a stage's output and mark it done, only if it is not done yet. True if this
        call completed it, False if it was already done (the caller then reuses the stored
        output and applies nothing)."""

    @abc.abstractmethod
    def fail_stage(self, run_id: str, stage: str, error: str, now: datetime) -> None: ...

    @abc.abstractmethod
    def finish_run(self, run_id: str, now: datetime, totals: dict, changed_scope_keys: Sequence[str]) -> bool:
        """Mark the run done, advance the session ``watermark`` to ``max(watermark, seq_to)``,
        release the session's claim (if this run holds it), and bump the version stamps of
        ``changed_scope_keys`` of the run's agent. Idempotent: False if already done."""

    @abc.abstractmethod
    def fail_run(self, run_id: str, error: str, now: datetime, *, dead: bool) -> None:
        """Mark a run ``failed`` (to be retried by the stale-run sweep) or ``dead`` (only an
        operator's replay picks it up), with its reason, and release the session's claim.
        The run's messages stay stored and unformed."""

    @abc.abstractmethod
    def reopen_run(self, run_id: str, now: datetime, lease_s: float, *, reset_attempts: bool = False) -> FormationRun | None:
        """Take over a failed, dead or lease-expired run: status ``claimed``, attempts + 1 (or 1
        when ``reset_attempts``), a new lease, and the session's claim pointed at it again if
        the session has no other live claim. None if the run is done, or its session is held by
        another live run (then it is retried later)."""

    @abc.abstractmethod
    def find_stale_runs(self, now: datetime, limit: int) -> list[FormationRun]:
        """Runs ``claimed``/``running`` whose lease expired, and ``failed`` runs."""

    @abc.abstractmethod
    def list_runs(
        self,
        *,
        status: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 50,
    ) -> list[FormationRun]:
        """Newest first."""
