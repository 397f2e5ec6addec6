"""Heap snapshots of a worker process, for finding what grows (off unless asked for).

``MEMORY_TRACEMALLOC_DIR=/some/dir`` makes every worker process (the main one and each pool
child) start :mod:`tracemalloc` when it starts and write a snapshot every
``MEMORY_TRACEMALLOC_EVERY_S`` seconds (default 120) to ``DIR/<pid>-<n>.snap``, together with
the targets of its open file descriptors (``DIR/<pid>-<n>.fds``, from ``/proc/self/fd``) and
glibc's allocator figures and the process's anonymous memory by kind (``DIR/<pid>-<n>.malloc``:
what lives outside Python's objects).
Compare two snapshots taken minutes apart::

    python -m bench.memdiff DIR/1234-2.snap DIR/1234-9.snap

Tracing costs CPU and memory of its own (about a third more of both on the formation
worker), so it is a diagnostic switch for ``bench.soak --trace-dir``, never a production
setting.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import tracemalloc
from pathlib import Path

from celery.signals import worker_init, worker_process_init

log = logging.getLogger("memory.memtrace")

ENV_DIR = "MEMORY_TRACEMALLOC_DIR"
ENV_EVERY = "MEMORY_TRACEMALLOC_EVERY_S"
#: frames kept per allocation: enough to see the caller of a library's allocation
FRAMES = 12

_started_pid: int | None = None


def fd_targets() -> list[str]:
    """What each open descriptor of this process points at (a path, ``socket:[…]``, ``pipe:[…]``)."""
    out = []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            out.append(f"{name} {os.readlink(f'/proc/self/fd/{name}')}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
    return out


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def malloc_figures() -> dict[str, int]:
    """glibc's allocator as it stands (``mallinfo2``, glibc >= 2.33): bytes taken from the
    system in arenas (``arena``) and in direct maps (``hblkhd``), in use (``uordblks``) and
    free but kept (``fordblks``). Memory outside Python's own allocator (SQLite, pydantic-core)
    shows here and not in a tracemalloc snapshot. Empty elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return {}
    info = libc.mallinfo2()
    return {name: getattr(info, name) for name, _ in _MallInfo2._fields_}


def anonymous_memory() -> dict[str, int]:
    """This process's anonymous memory (``/proc/self/smaps``) in bytes: the main heap
    (``brk``), 1 MiB maps (Python's object arenas), and every other anonymous map (other
    threads' malloc arenas, large blocks, thread stacks). Which of them grows tells a Python
    object from an allocator or a library."""
    out = {"anon_brk": 0, "anon_1mib_maps": 0, "anon_other": 0}
    size, kind = 0, None
    try:
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as fh:
            for line in fh:
                head = line.split()
                if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    start, end = (int(x, 16) for x in head[0].split("-"))
                    size, name = end - start, (head[5] if len(head) > 5 else "")
                    kind = "anon_brk" if name == "[heap]" else None if name else (
                        "anon_1mib_maps" if size == 1 << 20 else "anon_other")
                elif head[0] == "Anonymous:" and kind is not None:
                    out[kind] += int(head[1]) * 1024
    except OSError:
        return {}
    return out


def _dump(directory: Path, n: int) -> None:
    # the .snap comes last and whole (dumped aside, then renamed): a process that exits in the
    # middle of a dump leaves no snapshot without its .fds and .malloc for memdiff to read
    stem = directory / f"{os.getpid()}-{n}"
    snapshot = tracemalloc.take_snapshot()
    (Path(str(stem) + ".fds")).write_text("\n".join(fd_targets()) + "\n")
    figures = {**malloc_figures(), **anonymous_memory(), "tracemalloc_overhead": tracemalloc.get_tracemalloc_memory(),
               "traced": tracemalloc.get_traced_memory()[0], "threads": threading.active_count()}
    (Path(str(stem) + ".malloc")).write_text(json.dumps(figures) + "\n")
    snapshot.dump(str(stem) + ".snap.part")
    os.replace(str(stem) + ".snap.part", str(stem) + ".snap")


def _loop(directory: Path, every_s: float, stop: threading.Event) -> None:
    n = 0
    while not stop.wait(every_s):
        n += 1
        try:
            _dump(directory, n)
        except OSError as exc:  # a full disk or a removed directory ends the tracing, not the worker
            log.warning("heap snapshot not written to %s: %s", directory, exc)
            return


def start(environ=os.environ) -> bool:
    """Start tracing in this process when ``MEMORY_TRACEMALLOC_DIR`` is set; True if started."""
    global _started_pid
    directory = environ.get(ENV_DIR)
    if not directory or _started_pid == os.getpid():
        return False
    every_s = float(environ.get(ENV_EVERY, "120"))
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    if tracemalloc.is_tracing():  # inherited from a forking parent: start the child's own count
        tracemalloc.stop()
    tracemalloc.start(FRAMES)
    _started_pid = os.getpid()
    threading.Thread(target=_loop, args=(path, every_s, threading.Event()), name="memtrace",
                     daemon=True).start()
    log.warning("tracemalloc on: a heap snapshot every %.0f s to %s (a diagnostic; it slows the worker)",
                every_s, path)
    return True


@worker_init.connect
def _in_main(**_: object) -> None:
    start()


@worker_process_init.connect
def _in_child(**_: object) -> None:
    start()
