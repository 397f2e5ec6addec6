"""Whether the path of a SQLite store still names the file its connections have open.

An open connection keeps reading its file after the path is deleted or pointed at another
file (``make demo`` deletes ``demo.db`` and writes a new one): a long-running server would
go on answering from the deleted file, which nobody else can see or change any more. The
pool (``pool.Pool``) asks ``FileWatch.check`` before it lends a connection; the path is
looked at (one ``stat``, about 2 µs) at most once per ``CHECK_INTERVAL_S``, and on every
call while the file is missing, so a deleted store is refused until it is back.
"""

from __future__ import annotations

import os
import threading
import time

from pipeline.errors import StoreFileMissing

#: how often the path is looked at while its file is there (the pool lends a connection per
#: store call, many per request: a stat on each would cost more than it tells)
CHECK_INTERVAL_S = 1.0

SAME, REPLACED = "same", "replaced"


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when nothing is there."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


class FileWatch:
    """The (device, inode) the connections were opened on, against what the path names now."""

    def __init__(self, path: str, *, interval_s: float = CHECK_INTERVAL_S) -> None:
        self.path = os.path.abspath(path)
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._opened = identity(self.path)
        self._next = time.monotonic() + interval_s

    def check(self, *, now: bool = False) -> str:
        """``SAME``, or ``REPLACED`` once when the path names another file than before (the
        caller then drops its connections: new ones open the new file). Raises
        ``StoreFileMissing`` while nothing is at the path. ``now``: look even if the last
        look is recent (before a new connection is opened)."""
        with self._lock:
            if not now and self._opened is not None and time.monotonic() < self._next:
                return SAME
            self._next = time.monotonic() + self.interval_s
            found = identity(self.path)
            if found is None:
                self._opened = None  # whatever is created there next is another file
                raise StoreFileMissing(
                    f"SQLite store {self.path}: the file was deleted while this process had it open; "
                    f"nothing is served from the deleted copy. Recreate it (make demo, or memoryctl "
                    f"create-indexes) or point MEMORY_STORE_URL at another file"
                )
            if found == self._opened:
                return SAME
            self._opened = found
            return REPLACED
