"""The store port (SPEC §7): repository methods, with no query dicts leaking into the domain.

Two adapters implement it, ``sqlite.py`` (the embedded default) and ``mongo.py`` (production),
and one contract test suite (``tests/pipeline/store/test_contract.py``) runs unchanged against
both. Every method documented as *atomic* must stay correct when many processes (SQLite) or
threads (Mongo) race on it.

Conventions:
- every "now" is passed in by the caller (the clock port), never read inside the store;
- every query carries ``agent_id``;
- methods that apply an effect of a formation run are idempotent on the run id, so a stage
  rerun after a crash applies nothing twice;
- methods that change a run raise ``KeyError`` for an unknown run id (``renew_run_lease``
  returns False and ``reopen_run`` None instead).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pipeline.erasure import Plan
from schemas.documents import (
    AgentSettings,
    CachedContext,
    ConsolidatedBlob,
    Fact,
    FormationRun,
    Reflection,
    RejectedEvent,
    SessionState,
    StageRecord,
    StoredMessage,
)


@dataclass(frozen=True)
class IngestOutcome:
    """What happened to one message on ingest. A rejected message (its session belongs to
    another agent) was not stored: ``session`` is None and ``reason`` says why."""

    status: Literal["accepted", "duplicate", "rejected"]
    seq: int | None
    session: SessionState | None
    reason: str | None = None


def owned_by_another(session_id: str) -> str:
    """The reason a session of another agent refuses a message, an end or a claim. It never
    names the owner."""
    return f"session {session_id} belongs to another agent"


@dataclass(frozen=True)
class ClaimRule:
    """When a claim may be taken, evaluated *inside* the store's atomic operation.

    Built by ``pipeline.trigger``; the adapter only translates it. A claim is taken when the
    session has no live claim (none, or its lease expired and the run is no longer active)
    and, counted over messages after ``claimed_through``:
    - ``messages_since >= min_messages``, and
    - ``messages_since >= message_interval`` or ``tokens_since >= token_interval``
      (either may be None, meaning "no such condition", both None meaning "no threshold"), and
    - if ``idle_before`` is set, ``last_activity_at <= idle_before`` (the cold rule).
    """

    min_messages: int
    message_interval: int | None = None
    token_interval: float | None = None
    idle_before: datetime | None = None


@dataclass(frozen=True)
class FactCandidate:
    """A fact as the search side needs it: id, text and vector (for the local search).

    ``embedding`` may be a read-only float32 sequence rather than a ``list`` (adapters load
    100k of these at once): it supports ``len``, indexing, iteration, truth value, ``==``
    against a list, and ``np.asarray`` without a per-element copy.
    """

    fact_id: str
    scope: str
    user_id: str | None
    content: str
    embedding: list[float] | None
    formed_at: datetime


@dataclass
class ForgetCounts:
    counts: dict[str, int] = field(default_factory=dict)


class Store(abc.ABC):
    """Repository methods for every collection of §7."""

    # ------------------------------------------------------------------ lifecycle ----------
    @abc.abstractmethod
    def create_indexes(self) -> list[str]:
        """Create every index (unique keys included), idempotently. Returns their names."""

    @abc.abstractmethod
    def close(self) -> None: ...

    # ------------------------------------------------------------------ agents -------------
    @abc.abstractmethod
    def get_agent_settings(self, agent_id: str) -> AgentSettings:
        """The agent's toggles; an unknown agent gets the defaults of §1 (nothing is written)."""

    @abc.abstractmethod
    def put_agent_settings(self, settings: AgentSettings) -> None:
        """Register or replace an agent's settings."""

    # ------------------------------------------------------------------ ingest -------------
    @abc.abstractmethod
    def ingest_message(self, message: StoredMessage, now: datetime) -> IngestOutcome:
        """Store one message and update its session's trigger state, atomically.

        - A session belongs to the agent of its first message: a message of another agent
          changes nothing and returns ``status="rejected"`` with ``owned_by_another``'s reason
          (checked first, so it is never counted as a duplicate).
        - A duplicate ``event_id`` or (``session_id``, ``message_id``) changes nothing except the
          session's ``duplicates`` counter, and returns ``status="duplicate"``.
        - An accepted message gets the next per-session ``seq``; the session's ``last_seq``,
          ``messages_since``, ``tokens_since`` (by ``message.weighted_tokens``), ``users``,
          ``max_tier``, ``preview`` and ``last_activity_at`` (the max of old and ``now``) move
          with it. A message created after the session's ``ended_at`` reopens it (``ended_at``
          back to None; the end time stays in ``ended_history``). A crash half way must leave either nothing or a state that a redelivery of
          the same message completes (the message must never end up stored without a seq),
          and the session never counts a seq whose message is not stored: a claim covers only
          messages it can read.
        """

    def ingest_messages(self, messages: Sequence[StoredMessage], now: datetime) -> list[IngestOutcome]:
        """``ingest_message`` for each message in order, one outcome each: a message that
        repeats an earlier one of the same batch is a duplicate of it. Adapters may store the
        whole batch at once (atomically: all or nothing); this default stores them one by one,
        so a ``TransientError`` may leave a prefix stored (a redelivery sees it as duplicates)."""
        return [self.ingest_message(message, now) for message in messages]

    @abc.abstractmethod
    def record_rejection(self, rejected: RejectedEvent) -> None:
        """Keep a rejected event with its raw payload and structured errors."""

    @abc.abstractmethod
    def list_rejections(self, limit: int = 100) -> list[RejectedEvent]: ...

    @abc.abstractmethod
    def delete_rejections(self, rejection_ids: Sequence[str]) -> int:
        """Drop these records (their events were published again); returns how many were dropped."""

    @abc.abstractmethod
    def get_messages(self, session_id: str, seq_from: int, seq_to: int) -> list[StoredMessage]:
        """Messages with ``seq_from <= seq <= seq_to``, ordered by ``created_at`` then seq."""

    @abc.abstractmethod
    def count_messages(self, session_id: str) -> int: ...

    # ------------------------------------------------------------------ sessions -----------
    @abc.abstractmethod
    def get_session(self, session_id: str) -> SessionState | None: ...

    @abc.abstractmethod
    def declare_session_users(self, session_id: str, agent_id: str, user_ids: Sequence[str]) -> SessionState:
        """Merge ``user_ids`` into the session's ``users``, atomically (a set union: racing
        declarations and ingests lose no one), and return the session as it now stands. A
        session not stored yet is created for ``agent_id``, with no message: it then belongs to
        that agent, as it would to the agent of its first message. A session of another agent
        is left alone and ``InvalidInput("session_id", ...)`` is raised."""

    @abc.abstractmethod
    def mark_session_ended(self, session_id: str, now: datetime, agent_id: str | None = None) -> SessionState | None:
        """Set ``ended_at`` and append it to ``ended_history``, unless the session is ended
        already (the first end time stays); None for an unknown session. A message written after
        the end reopens the session (``ingest_message``), so a later end is recorded again. With
        ``agent_id``, a session of another agent is left alone and ``InvalidInput("session_id",
        ...)`` is raised."""

    @abc.abstractmethod
    def find_cold_sessions(self, idle_before: datetime, min_messages: int, limit: int) -> list[str]:
        """Ids of sessions idle since ``idle_before`` with ``>= min_messages`` unclaimed messages
        and no live claim. Candidates only: the claim itself re-checks atomically."""

    # ------------------------------------------------------------------ claims & runs -------
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
    def get_run(self, run_id: str) -> FormationRun | None: ...

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

    # ------------------------------------------------------------------ facts --------------
    @abc.abstractmethod
    def insert_fact(self, fact: Fact) -> tuple[bool, str]:
        """Insert unless a live fact with the same (agent, scope key, hash) or the same
        ``fact_id`` exists. Returns (inserted, id of the fact that now holds that text). A
        retired fact never blocks its text: that text comes back as a new fact, and the retired
        one stays as it was. Racing inserts of one text leave one live fact."""

    @abc.abstractmethod
    def update_fact(
        self, fact_id: str, *, content: str, hash: str, embedding: list[float] | None,
        embedding_model: str | None, run_id: str, now: datetime, valid_from: datetime | None = None,
        expected_version: int | None = None, sources: tuple[Sequence[str], Sequence[str]] = ((), ()),
    ) -> bool:
        """UPDATE effect: new content, ``version`` + 1, ``updated_at`` = now, previous text
        appended to ``history`` (with ``run_id``) with its validity closed at ``valid_from``
        (the new text's source message time, default now), which opens the new text's, and
        ``sources`` (message ids, user ids of the new text) added to the fact's provenance.
        No-op (False) if ``run_id`` already updated this fact, if the fact is retired, if its
        version is no longer ``expected_version`` (another run changed it since the decision),
        or if the new hash already exists in a live fact of its scope key."""

    @abc.abstractmethod
    def retire_fact(
        self, fact_id: str, now: datetime, run_id: str, *, valid_to: datetime | None = None,
        expected_version: int | None = None,
    ) -> bool:
        """DELETE effect: set ``retired_at`` (and ``valid_to``: when the superseding fact became
        valid, default now, never before the fact's ``valid_from``) unless already retired or
        its version is no longer ``expected_version``."""

    @abc.abstractmethod
    def get_facts(self, fact_ids: Iterable[str]) -> list[Fact]: ...

    @abc.abstractmethod
    def find_fact_by_hash(self, agent_id: str, scope_key: str, hash: str) -> Fact | None:
        """The live fact holding that text (a retired one is no longer known)."""

    @abc.abstractmethod
    def search_candidates(
        self, agent_id: str, scope_keys: Sequence[str], embedding_model: str | None
    ) -> list[FactCandidate]:
        """Every live (not retired) fact of the agent in these scope keys, with its embedding
        when ``embedding_model`` matches (``None``: any model, embedding omitted). The local
        search caches the result per (agent, scope keys), invalidated by the scope stamps."""

    @abc.abstractmethod
    def recent_facts(
        self, agent_id: str, scope_keys: Sequence[str], since: datetime, limit: int | None, *,
        include_retired: bool = False,
    ) -> list[Fact]:
        """Live facts (and retired ones with ``include_retired``) whose latest change
        (``updated_at``) is at or after ``since``, latest change first, at most ``limit``
        (None: all)."""

    @abc.abstractmethod
    def recent_fact_ids(
        self, agent_id: str, scope_key: str, embedding_model: str, since: datetime, limit: int
    ) -> list[str]:
        """Ids of the live facts of one scope key whose vector is of ``embedding_model``, formed
        at or after ``since``, newest first, at most ``limit``. An ordinary indexed query: it
        sees a write at once, which an eventually consistent search index does not (dedup
        reads its own recent writes through it)."""

    @abc.abstractmethod
    def record_fact_access(self, fact_ids: Sequence[str], now: datetime) -> None:
        """``access_count`` + 1 and ``last_accessed_at`` = now on each hit."""

    @abc.abstractmethod
    def list_facts(
        self, agent_id: str, scope_key: str | None = None, *, include_retired: bool = False,
        limit: int | None = None,
    ) -> list[Fact]:
        """Newest first."""

    @abc.abstractmethod
    def count_facts(self, agent_id: str, scope_key: str) -> int: ...

    @abc.abstractmethod
    def iter_facts_for_reembed(self, agent_id: str | None, not_model: str, batch: int) -> Iterable[list[Fact]]:
        """Batches of live facts whose ``embedding_model`` is not ``not_model``."""

    @abc.abstractmethod
    def set_fact_embedding(self, fact_id: str, embedding: list[float], model: str) -> None: ...

    # ------------------------------------------------------------------ reflections --------
    @abc.abstractmethod
    def insert_reflections(self, reflections: Sequence[Reflection]) -> int:
        """Insert those whose ``reflection_id`` is new; returns how many were new."""

    @abc.abstractmethod
    def unabsorbed_reflections(self, agent_id: str, scope_key: str, limit: int | None = None) -> list[Reflection]:
        """Buffered reflections, oldest first."""

    @abc.abstractmethod
    def count_unabsorbed(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]: ...

    @abc.abstractmethod
    def mark_absorbed(self, reflection_ids: Sequence[str], blob_version: int, now: datetime) -> int:
        """Exactly these, if not yet absorbed: ``absorbed``, ``absorbed_at``, ``consolidated_into``."""

    @abc.abstractmethod
    def list_reflections(self, agent_id: str, scope_key: str, *, include_absorbed: bool = True) -> list[Reflection]: ...

    # ------------------------------------------------------------------ consolidated -------
    @abc.abstractmethod
    def get_blob(self, agent_id: str, scope_key: str) -> ConsolidatedBlob | None: ...

    @abc.abstractmethod
    def save_blob(self, blob: ConsolidatedBlob, expected_version: int) -> bool:
        """Compare-and-set on ``version``: write ``blob`` only if the stored version is
        ``expected_version`` (0 = no blob yet). False if another consolidation got there."""

    @abc.abstractmethod
    def acquire_lease(self, name: str, holder: str, now: datetime, ttl_s: float) -> bool:
        """A named lease (one consolidation per scope key, ...): True if ``holder`` now holds it
        (free, expired, or already held by ``holder``)."""

    @abc.abstractmethod
    def release_lease(self, name: str, holder: str) -> None: ...

    # ------------------------------------------------------------------ versions & cache ----
    @abc.abstractmethod
    def bump_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> None: ...

    @abc.abstractmethod
    def get_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        """Current stamp per scope key (0 when never bumped)."""

    @abc.abstractmethod
    def get_cached_context(self, session_id: str, user_id: str) -> CachedContext | None: ...

    @abc.abstractmethod
    def put_cached_context(self, cached: CachedContext) -> None: ...

    # ------------------------------------------------------------------ erasure ------------
    @abc.abstractmethod
    def forget_user(self, user_id: str, agent_id: str | None = None) -> dict[str, int]:
        """Delete everything of a user (under one agent, or all): user facts (history with
        them), user reflections and blobs, the user's messages, rejected events that name them,
        context caches, and their id in session user lists. A session where they were the only
        human goes whole (messages, session memory, finished runs; a run in flight is emptied
        and ends ``erased``); a group session keeps the others' and the assistant's messages
        and its session memory, loses its finished runs that name the user, and an unfinished
        one is emptied and failed, to be formed again without them. Items of other scopes
        formed from the user's messages are removed by provenance (``erase_memory``). Other
        users' data is untouched. Returns counts per collection."""

    @abc.abstractmethod
    def erase_memory(self, plan: Plan) -> None:
        """Execute the removal part of a ``pipeline.erasure.Plan``: delete its facts (history
        with them), reflections and blobs, move the stamps of the scope keys it changed, and
        delete the cached contexts of every agent it changed (one may quote a removed item).
        Idempotent: what is already gone is skipped."""

    @abc.abstractmethod
    def dump_all(self) -> dict[str, list[dict]]:
        """Every stored document/row as plain dicts, per collection: for audits and tests
        (forget-user scans it for leftovers)."""
