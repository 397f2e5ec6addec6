"""What the routes share, built once per worker process by ``api.app.create_app``: settings,
the store, the clients (``workers.deps.Deps``), one ``MemoryService`` per agent, the token
verifier, the rate limiter and the sender of queued jobs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request

from api.limits import RateLimiter
from api.tokens import TokenVerifier
from pipeline.service import MemoryService
from schemas.api_settings import ApiSettings
from schemas.settings import Settings

#: services kept per process (one per agent; the least recently used one goes first)
MAX_SERVICES = 4096


@dataclass
class AppContext:
    settings: Settings
    api_settings: ApiSettings
    deps: object                                   # workers.deps.Deps, or a test's own
    service_factory: Callable[[str], MemoryService]
    token_verifier: TokenVerifier
    rate_limiter: RateLimiter
    send_job: Callable[[str], None]                # hands a job id to the maintenance queue
    start_run: Callable[[str], None]               # starts a reopened run's chain (replay)
    _services: OrderedDict = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def store(self):
        return self.deps.store

    @property
    def clock(self):
        return self.deps.clock

    def service(self, agent_id: str) -> MemoryService:
        with self._lock:
            found = self._services.get(agent_id)
            if found is not None:
                self._services.move_to_end(agent_id)
                return found
        made = self.service_factory(agent_id)
        with self._lock:
            self._services[agent_id] = made
            while len(self._services) > MAX_SERVICES:
                self._services.popitem(last=False)
        return made


async def app_context(request: Request) -> AppContext:
    """FastAPI dependency: the app's shared context (async: a sync dependency costs a hop to
    the thread pool per request, for an attribute read)."""
    return request.app.state.ctx
