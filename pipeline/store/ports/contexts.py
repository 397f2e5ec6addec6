"""The context cache port (design §7): one assembled context per (session, user), kept until
a scope stamp it was built on moves. Part of ``pipeline.store.port.Store``."""

from __future__ import annotations

import abc
from typing import Protocol

from schemas.documents import CachedContext


class ContextStore(Protocol):
    """Cached contexts."""

    @abc.abstractmethod
    def get_cached_context(self, session_id: str, user_id: str) -> CachedContext | None: ...

    @abc.abstractmethod
    def put_cached_context(self, cached: CachedContext) -> None: ...
