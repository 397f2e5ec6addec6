"""Thread pools that live as long as their process, one per purpose.

A pool made per call starts fresh threads every time, and whatever a thread opens for itself
(a SQLite connection per thread, see ``pipeline.store.sqlite.db``) is opened again by each
of them. A pool made at import is inherited by a forked worker process with threads that do
not exist there. ``shared_pool`` makes each pool once per process, on first use.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}


def shared_pool(name: str, max_workers: int) -> ThreadPoolExecutor:
    """This process's pool called ``name`` (its threads are named after it)."""
    with _lock:
        held = _pools.get(name)
        if held is None or held[0] != os.getpid():
            held = _pools[name] = (os.getpid(), ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name))
        return held[1]
