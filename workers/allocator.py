"""glibc's allocator in a worker process: few arenas, and free pages handed back.

A threads worker (formation: 32 pool threads, 8 dedup threads) grew its heap by about
1.25 MB/min in ``bench.soak`` while its live Python objects stayed flat (tracemalloc
snapshots minutes apart: +2 MB traced in 8 minutes). The growth was in glibc's per-thread
arenas (``/proc/<pid>/smaps``: eight 64 MB arena heaps for ten threads, each growing) and in
the memory glibc kept free in them (``mallinfo2``'s ``fordblks``: 5.3 -> 12.3 MB in four
minutes): every new pool thread got an arena of its own, and the run documents, prompts and
vectors each task allocates and frees left each arena's high-water mark behind.

So a worker caps the arenas (``M_ARENA_MAX``, as ``MALLOC_ARENA_MAX`` does; threads then share
them) before its pool starts, and returns free pages to the system after a task at most once
a minute (``malloc_trim``). Off elsewhere than glibc (musl, macOS): both calls are missing
there, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time

from celery.signals import task_postrun, worker_init, worker_process_init

log = logging.getLogger("memory.allocator")

#: arenas glibc may create in a worker process (its default: 8 per core)
ARENAS = 2
#: seconds between two trims: a trim walks every arena (about a millisecond)
TRIM_EVERY_S = 60.0
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc/malloc.h)

_libc = None
_last_trim = 0.0
_trim_lock = threading.Lock()


def _glibc():
    global _libc
    if _libc is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc only
        except (OSError, AttributeError):
            libc = False
        _libc = libc
    return _libc or None


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Let glibc create at most ``arenas`` arenas in this process from now on; True if set."""
    libc = _glibc()
    return bool(libc and libc.mallopt(_M_ARENA_MAX, arenas))


def trim(now: float | None = None) -> bool:
    """Hand free pages back to the system, unless that was done less than a minute ago."""
    global _last_trim
    libc = _glibc()
    if libc is None:
        return False
    now = time.monotonic() if now is None else now
    with _trim_lock:
        if now - _last_trim < TRIM_EVERY_S:
            return False
        _last_trim = now
    libc.malloc_trim(0)
    return True


@worker_init.connect
def _before_the_pool(**_: object) -> None:
    if not cap_arenas():
        log.debug("not glibc: malloc arenas left as they are")


@worker_process_init.connect
def _in_child(**_: object) -> None:
    cap_arenas()


@task_postrun.connect
def _after_a_task(**_: object) -> None:
    trim()
