"""The agent runtime's entry point: a ``MemoryService`` wired to the worker queues.

    from workers.client import memory_service

    memory = memory_service("agent-1")          # clients from MEMORY_* settings
    xml = memory.get_memory_context(session_id="s-42", user_id="alice")
    memory.maybe_form_memories([...], session_id="s-42")

``pipeline.service.MemoryService`` knows no queue (``pipeline`` imports nothing of
``workers``): here it gets the Celery publisher of conversation events, the starter of claimed
runs (``process_cold_session``), and its store, search and embedder from the same builder
the workers use (``workers.deps.Deps``), so the runtime and the workers open their clients
alike.
"""

from __future__ import annotations

from typing import Any

from pipeline import names
from pipeline.service import MemoryService
from schemas.settings import Settings, get_settings
from workers.deps import Deps
from workers.dispatch import send


def start_run(run_id: str) -> None:
    """Start a claimed run's chain: its first stage on the formation queue."""
    send(names.TASK_EXTRACT_FACTS, {"run_id": run_id})


def memory_service(agent_id: str, *, settings: Settings | None = None, **clients: Any) -> MemoryService:
    """A ``MemoryService`` for ``agent_id`` that publishes to and starts runs on the worker
    queues. ``clients`` (store, search, embedder, publisher, clock, run_starter) override the
    built ones, as for ``MemoryService`` itself."""
    settings = settings or get_settings()
    deps = Deps(settings)
    if "publisher" not in clients:
        from workers.producer import CeleryPublisher

        clients["publisher"] = CeleryPublisher()
    clients.setdefault("run_starter", start_run)
    if "store" not in clients:
        clients["store"] = deps.store
    if "search" not in clients:
        clients["search"] = deps.search if clients["store"] is deps.store else None
    if "embedder" not in clients:
        clients["embedder"] = deps.embedder
    return MemoryService(agent_id, settings=settings, **clients)
