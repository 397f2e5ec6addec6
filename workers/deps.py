"""Clients built once per worker process and injected into tasks (docs/style.md "The shape": arq's on_startup).

Celery's ``worker_process_init`` signal resets them in each forked child, so no connection
is shared across a fork; the first task of a process builds them lazily. When the worker is
ready it warns of any configured model its provider shuts down soon (``pipeline.llm.lifecycle``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from functools import cached_property

from celery.signals import worker_process_init, worker_process_shutdown, worker_ready

from pipeline.clock import Clock
from pipeline.llm.broker_redis import broker_redis
from schemas.settings import Settings, get_settings


@dataclass
class Deps:
    settings: Settings

    @cached_property
    def clock(self) -> Clock:
        return Clock()

    @cached_property
    def store(self):
        from pipeline.store import open_store

        return open_store(self.settings)

    @cached_property
    def llm(self):
        from pipeline.llm import open_llm

        return open_llm(self.settings, redis_client=self.slots_redis)

    @cached_property
    def slots_redis(self):
        """The broker's Redis, where the LLM concurrency cap is shared by every worker (None
        for another broker: the cap is then per process)."""
        return broker_redis(self.settings)

    @cached_property
    def embedder(self):
        from pipeline.embeddings import open_embedder

        return open_embedder(self.settings)

    @cached_property
    def webhook_sender(self):
        from pipeline.webhooks.sender import HttpSender

        return HttpSender(self.settings.webhook_timeout_s)

    @cached_property
    def search(self):
        from pipeline.search import open_search

        return open_search(self.store, self.settings)


_lock = threading.Lock()
_deps: Deps | None = None


def get_deps() -> Deps:
    global _deps
    with _lock:
        if _deps is None:
            _deps = Deps(get_settings())
        return _deps


def set_deps(deps: Deps | None) -> None:
    """Inject ready-made clients (the in-process demo worker and tests do this)."""
    global _deps
    with _lock:
        _deps = deps


log = logging.getLogger("memory.worker")


@worker_ready.connect
def warn_of_model_shutdowns(**_: object) -> list[str]:
    """Log a WARNING for each configured model whose provider shuts it down within 60 days
    (or already has); returns the lines, for the caller that wants them."""
    from pipeline.llm.lifecycle import warnings

    deps = get_deps()
    lines = warnings(deps.settings, deps.clock.now().date())
    for line in lines:
        log.warning("%s", line)
    return lines


@worker_process_init.connect
def _reset_in_child(**_: object) -> None:
    set_deps(None)


@worker_process_shutdown.connect
def _close(**_: object) -> None:
    deps = _deps
    if deps is not None and "store" in deps.__dict__:
        deps.store.close()
