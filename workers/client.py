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


class InProcessMemory(MemoryService):
    """A ``MemoryService`` whose worker runs in this process (the ``memory://`` broker, which
    no other process reaches): what it publishes is formed here, and ``wait`` says when."""

    def wait(self, *, session_id: str, timeout_s: float = 60.0) -> bool:
        """Block until what was published for ``session_id`` is formed and consolidated (the
        worker idle); False if ``timeout_s`` passed first."""
        from workers.in_process import ensure_worker, wait_until_idle

        return wait_until_idle(ensure_worker(), self.store, [session_id], timeout_s)


def memory_service(agent_id: str, *, settings: Settings | None = None, **clients: Any) -> MemoryService:
    """A ``MemoryService`` for ``agent_id`` that publishes to and starts runs on the worker
    queues. ``clients`` (store, search, embedder, publisher, clock, run_starter) override the
    built ones, as for ``MemoryService`` itself. With the ``memory://`` broker a worker starts
    in this process (``workers.in_process``) and the service is an ``InProcessMemory``."""
    settings = settings or get_settings()
    kind = MemoryService
    if settings.broker_url.startswith("memory://"):
        from workers.in_process import ensure_worker

        ensure_worker()
        kind = InProcessMemory
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
    return kind(agent_id, settings=settings, **clients)
