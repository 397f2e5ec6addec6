"""The fact port (design §7): facts with their history, the candidates search reads, and
re-embedding.

What formation, the read side and ``memoryctl reembed`` need; part of
``pipeline.store.port.Store``. Methods that apply an effect of a run are idempotent on the run id.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from schemas.documents import Fact
from schemas.metadata import merged


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
    content: str                       # what the text branch reads: ``Fact.search_text``
    embedding: list[float] | None
    formed_at: datetime


@dataclass(frozen=True)
class FactUpdate:
    """An UPDATE effect on one fact (``FactStore.update_fact``): the new text and its vector,
    the run that applies it, when the new text became valid, the version the decision read,
    and the provenance of the new text."""

    content: str
    hash: str
    embedding: list[float] | None
    embedding_model: str | None
    run_id: str
    now: datetime
    valid_from: datetime | None = None       # the new text's source message time; None: now
    expected_version: int | None = None      # None: whatever version is stored
    source_message_ids: Sequence[str] = ()
    source_user_ids: Sequence[str] = ()
    source_text: str | None = None           # the new text's source message line; None: keep
    expires_at: datetime | None = None       # a new expiry (design §13 "Expiry"); None: keep the fact's
    clear_expiry: bool = False               # True: the fact no longer expires (an edit took its expiry away)
    categories: Sequence[str] | None = None  # the new categories (design §13); None: keep the fact's
    # the filterable metadata of the new text's messages, joined to the fact's by the store on the
    # version it writes over (``schemas.metadata.merged``); None: keep the fact's
    metadata: Mapping[str, Any] | None = None
    # the fact's whole metadata from now on, as a person corrects it (an edit, an import line):
    # it replaces the fact's rather than joining it ({}: none); None: ``metadata`` decides
    replace_metadata: Mapping[str, Any] | None = None

    def metadata_over(self, kept: Mapping[str, Any]) -> dict[str, Any]:
        """The metadata of the version written over ``kept`` (the fact's, as the store read it)."""
        if self.replace_metadata is not None:
            return dict(self.replace_metadata)
        return dict(kept) if self.metadata is None else merged(kept, self.metadata)


class FactStore(Protocol):
    """Facts: their effects, reads and vectors."""

    @abc.abstractmethod
    def insert_fact(self, fact: Fact) -> tuple[bool, str]:
        """Insert unless a live fact with the same (agent, scope key, hash) or the same
        ``fact_id`` exists. Returns (inserted, id of the fact that now holds that text). A
        retired fact never blocks its text: that text comes back as a new fact, and the retired
        one stays as it was. Racing inserts of one text leave one live fact."""

    @abc.abstractmethod
    def update_fact(self, fact_id: str, change: FactUpdate) -> bool:
        """UPDATE effect: new content, ``version`` + 1, ``updated_at`` = now, previous text
        appended to ``history`` (with ``run_id``) with its validity closed at ``valid_from``
        (the new text's source message time, default now), which opens the new text's, and
        the new text's source message and user ids added to the fact's provenance;
        ``source_text`` (the new text's source message line) replaces the fact's, if given.
        No-op (False) if ``run_id`` already updated this fact, if the fact is retired, if its
        version is no longer ``expected_version`` (another run changed it since the decision),
        or if the new hash already exists in a live fact of its scope key."""

    @abc.abstractmethod
    def retire_fact(
        self, fact_id: str, now: datetime, run_id: str, *, valid_to: datetime | None = None,
        expected_version: int | None = None, reason: str | None = None,
    ) -> bool:
        """DELETE effect: set ``retired_at`` (and ``valid_to``: when the superseding fact became
        valid, default now, never before the fact's ``valid_from``) and ``retired_reason``
        unless already retired or its version is no longer ``expected_version``."""

    @abc.abstractmethod
    def expired_fact_ids(self, now: datetime, limit: int) -> list[str]:
        """Ids of live facts (of every agent) whose ``expires_at`` is at or before ``now``,
        soonest expired first, at most ``limit``: by an index, so that beat's expiry task
        examines those and no other fact."""

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
        include_retired: bool = False, having: Sequence[Sequence[str]] = (),
    ) -> list[Fact]:
        """Live facts (and retired ones with ``include_retired``) whose latest change
        (``updated_at``) is at or after ``since``, latest change first, at most ``limit``
        (None: all). ``having``: label groups (``MemoryFilter.groups``), each of which a fact
        must hold a label of; with it, only live facts."""

    @abc.abstractmethod
    def labelled_fact_ids(
        self, agent_id: str, scope_keys: Sequence[str], having: Sequence[Sequence[str]],
    ) -> set[str]:
        """Ids of the live facts of the agent in ``scope_keys`` holding a label of every group
        of ``having`` (design §13 "Categories and metadata"), read through an index of the
        labels, never by reading the agent's facts."""

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
        limit: int | None = None, offset: int = 0,
    ) -> list[Fact]:
        """Newest first; ``offset`` skips that many first (a page of a listing, without
        reading the pages before it into documents)."""

    @abc.abstractmethod
    def count_facts(self, agent_id: str, scope_key: str) -> int: ...

    @abc.abstractmethod
    def memory_scope_keys(self, agent_id: str) -> list[str]:
        """Every scope key of the agent that holds memory (a live fact, a reflection or a
        consolidated blob), sorted: the people and sessions the inspector lists, whatever
        became of the runs that formed it (an erasure deletes the runs naming the person)."""

    @abc.abstractmethod
    def other_embedding_model(self, agent_id: str, model: str) -> str | None:
        """The embedding model of one live fact of the agent whose vector is not of ``model``
        (None when every live vector is of ``model``; facts without a vector do not count).
        An index lookup, asked before every search."""

    @abc.abstractmethod
    def iter_facts_for_reembed(self, agent_id: str | None, not_model: str, batch: int) -> Iterable[list[Fact]]:
        """Batches of live facts whose ``embedding_model`` is not ``not_model``."""

    @abc.abstractmethod
    def set_fact_embedding(self, fact_id: str, embedding: list[float], model: str) -> None: ...
