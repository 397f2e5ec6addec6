"""The lease and stamp port (design §7): named leases (one consolidation per scope key, ...)
and the version stamps of scope keys that invalidate caches. Part of
``pipeline.store.port.Store``."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol


class LeaseStore(Protocol):
    """Named leases and scope version stamps."""

    @abc.abstractmethod
    def acquire_lease(self, name: str, holder: str, now: datetime, ttl_s: float) -> bool:
        """A named lease (one consolidation per scope key, ...): True if ``holder`` now holds it
        (free, expired, or already held by ``holder``)."""

    @abc.abstractmethod
    def release_lease(self, name: str, holder: str) -> None: ...

    @abc.abstractmethod
    def bump_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> None: ...

    @abc.abstractmethod
    def get_scope_versions(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]:
        """Current stamp per scope key (0 when never bumped)."""

    def stamps_epoch(self) -> int:
        """How many times the data under the stamps was swapped while this process held the
        store (a SQLite file replaced at its path: ``sqlite.file_watch``); a cache keyed by
        stamps read before holds another store's data. 0 for a store that cannot be swapped."""
        return 0
