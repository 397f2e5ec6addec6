"""The blob port (design §7): one consolidated blob per (agent, scope key), written by
compare-and-set. Part of ``pipeline.store.port.Store``."""

from __future__ import annotations

import abc
from typing import Protocol

from schemas.documents import ConsolidatedBlob


class BlobStore(Protocol):
    """Consolidated blobs."""

    @abc.abstractmethod
    def get_blob(self, agent_id: str, scope_key: str) -> ConsolidatedBlob | None: ...

    @abc.abstractmethod
    def save_blob(self, blob: ConsolidatedBlob, expected_version: int) -> bool:
        """Compare-and-set on ``version``: write ``blob`` only if the stored version is
        ``expected_version`` (0 = no blob yet). False if another consolidation got there."""
