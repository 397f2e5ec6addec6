"""A Celery worker inside the calling process, for the ``memory://`` broker, which lives in
one process and reaches no other: ``make demo``, ``memoryctl ui`` over the demo's store, and an
agent that calls ``memory_service`` with ``MEMORY_BROKER_URL=memory://`` (``workers.client``).

``running_worker`` runs one for a block (a solo pool on a daemon thread, every queue);
``ensure_worker`` starts one for the rest of the process. ``wait_until_idle`` returns once the
given sessions are formed and the worker has had nothing to do for a few polls in a row (a
session end's consolidation runs after its run is done).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Protocol

from pipeline.store.port import IngestStore, RunStore

SETTLE_POLLS = 3
POLL_S = 0.05

_lock = threading.Lock()
_started: list = []  # the app of the process's worker, once started


@contextlib.contextmanager
def running_worker() -> Iterator[object]:
    """A worker of every queue in this process for the block; yields the Celery app."""
    from celery.contrib.testing.worker import start_worker

    from pipeline import names
    from workers.app import app

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING", queues=list(names.QUEUES),
                      shutdown_timeout=30):
        yield app


def ensure_worker() -> object:
    """The Celery app, with a worker of this process started on first call and stopped at exit."""
    with _lock:
        if not _started:
            block = running_worker()
            _started.append(block.__enter__())
            atexit.register(block.__exit__, None, None, None)
        return _started[0]


def _queued(app) -> int:
    from kombu.exceptions import ChannelError

    from pipeline import names

    total = 0
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        for queue in names.QUEUES:
            try:
                total += channel.queue_declare(queue=queue, passive=True).message_count
            except ChannelError:
                pass  # a queue nobody declared yet holds nothing
    return total


class FormationReads(Protocol):
    """What says formation is done: the sessions' claims (ingest) and the runs' statuses."""

    ingest: IngestStore
    runs: RunStore


def _formed(store: FormationReads, session_ids: Sequence[str]) -> bool:
    for session_id in session_ids:
        session = store.ingest.get_session(session_id)
        if session is None or session.active_run_id is not None or session.claimed_through < session.last_seq:
            return False
    return all(run.status in ("done", "failed", "dead", "erased") for run in store.runs.list_runs(limit=1000))


def wait_until_idle(app, store: FormationReads, session_ids: Sequence[str], timeout_s: float) -> bool:
    """True once every session is formed, no run is active and the worker has been idle for
    a few polls in a row (consolidation tasks run after a run is done); False on timeout."""
    from celery.worker import state as worker_state

    deadline = time.monotonic() + timeout_s
    quiet = 0
    while time.monotonic() < deadline:
        busy = _queued(app) or worker_state.active_requests or worker_state.reserved_requests
        quiet = 0 if busy or not _formed(store, session_ids) else quiet + 1
        if quiet >= SETTLE_POLLS:
            return True
        time.sleep(POLL_S)
    return False
