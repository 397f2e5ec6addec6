"""The provenance port (design §11 "Provenance and erasure"): what rests on one user, read
through indexes, so that its cost grows with what the user has, not with the store. Export,
erasure and its verification read it. Part of ``pipeline.store.port.Store``."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import Protocol

from pipeline.footprint import Footprint, Resting
from pipeline.withdrawal import Withdrawal
from schemas.documents import ConsolidatedBlob, Fact, FormationRun, Reflection, StoredMessage


class ProvenanceStore(Protocol):
    """Provenance queries; ``agent_id`` None: every agent."""

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
    def own_blobs(self, user_id: str, agent_id: str | None = None) -> list[ConsolidatedBlob]:
        """The blobs of the user's own scope (``user:<id>``), by agent, whatever wrote them (a
        consolidation, an owner's replace, an import): read by the consolidated scope-key index."""

    @abc.abstractmethod
    def reflection_ids(self, agent_id: str, scope_key: str, *, absorbed_only: bool = False) -> list[str]:
        """The ids of the reflections stored at the key (only those absorbed into its blob, with
        ``absorbed_only``), oldest first, read without their documents: what an erasure plan
        and its verification need of a blob's scope."""

    @abc.abstractmethod
    def absorbed_from_others(self, agent_id: str, scope_key: str, user_id: str) -> bool:
        """Whether a reflection absorbed into the key's blob rests on the messages of a user
        other than ``user_id`` (an export then gives the user the blob's sections that took
        their reflections, not the whole blob). A reflection with no source user counts as
        nobody else's."""

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
    def withdraw_user(self, withdrawal: Withdrawal) -> Fact | Reflection | None:
        """Apply ``withdrawal`` (``pipeline.withdrawal.withdrawn``) to its fact or pending
        reflection, atomically, only while the item is in the state it was planned on
        (``pipeline.withdrawal.applies``); a fact's stored search text follows. The item
        written, or None when it changed meanwhile or is gone."""
