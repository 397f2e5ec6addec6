"""The admin port (design §7): lifecycle, usage records, re-embedding, erasure and dumps.

What operators' commands, maintenance tasks and audits need; part of
``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator
from datetime import datetime

from pipeline.erasure import Plan
from pipeline.footprint import Footprint, Resting
from schemas.documents import ConsolidatedBlob, Fact, FormationRun, StoredMessage, UsageRecord


class AdminStore(abc.ABC):
    """Indexes, closing, usage records, re-embedding, erasure and whole-store dumps."""

    @abc.abstractmethod
    def create_indexes(self) -> list[str]:
        """Create every index (unique keys included), idempotently. Returns their names."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def record_usage(self, record: UsageRecord) -> None:
        """Keep the priced model calls of work done outside any run (idempotent on its id)."""

    @abc.abstractmethod
    def list_usage(self, agent_id: str, since: datetime | None = None) -> list[UsageRecord]:
        """An agent's usage records at or after ``since``, oldest first."""

    @abc.abstractmethod
    def iter_facts_for_reembed(self, agent_id: str | None, not_model: str, batch: int) -> Iterable[list[Fact]]:
        """Batches of live facts whose ``embedding_model`` is not ``not_model``."""

    @abc.abstractmethod
    def set_fact_embedding(self, fact_id: str, embedding: list[float], model: str) -> None: ...

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

    # ---------------------------------------------------------------- provenance queries -----
    # What rests on one user, read through indexes (design §11 "Provenance and erasure"): their
    # cost grows with what the user has, not with the store. ``agent_id`` None: every agent.

    @abc.abstractmethod
    def resting_on(self, user_id: str, agent_id: str | None = None) -> Resting:
        """Facts (retired ones included, with their history) and reflections whose
        ``source_user_ids`` name the user, or that are of the user's own scope."""

    @abc.abstractmethod
    def unattributed(self, agent_id: str | None = None) -> Resting:
        """Facts and reflections outside user scopes with no source user at all (stored
        before provenance, or migrated without one)."""

    @abc.abstractmethod
    def unexplained_blobs(self, agent_id: str | None = None) -> list[ConsolidatedBlob]:
        """Blobs outside user scopes holding text that no merge of reflections made (no
        ``last_run_id``, no ``absorbing_ids``: v1 shard text)."""

    @abc.abstractmethod
    def footprint(self, user_id: str, agent_id: str | None = None) -> Footprint:
        """How many documents still name the user in an id field, per ``collection.field``
        (``pipeline.user_ids``), and the leases of the user's scope."""

    @abc.abstractmethod
    def rejected_naming(self, user_id: str, agent_id: str | None = None) -> list[str]:
        """Ids of the rejected events whose raw payload names the user
        (``pipeline.user_ids.raw_names_user``); those of no known agent count under every agent."""

    @abc.abstractmethod
    def user_messages(self, user_id: str, agent_id: str | None = None) -> Iterator[StoredMessage]:
        """The messages the user sent, in ingest order, streamed."""

    @abc.abstractmethod
    def user_runs(self, user_id: str, agent_id: str | None = None) -> list[FormationRun]:
        """The formation runs whose ``user_ids`` name the user, oldest first."""

    @abc.abstractmethod
    def set_item_sources(self, kind: str, item_id: str, user_ids: list[str], message_ids: list[str]) -> bool:
        """Record the sources derived for an item stored without them (``kind``: ``facts`` or
        ``reflections``); its ``source_message_ids`` are set only where it has none. Only an
        item with no ``source_user_ids`` changes: True when it did."""

    @abc.abstractmethod
    def dump_all(self) -> dict[str, list[dict]]:
        """Every stored document/row as plain dicts, per collection: for audits and tests
        only. It reads the whole store: no production path calls it (a test checks)."""
