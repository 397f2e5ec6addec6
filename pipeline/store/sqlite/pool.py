"""The connections a process keeps to one SQLite file for its store calls, and the class
decorator that makes every public store method borrow one for its call (``db``).

Before it lends a connection the pool asks its ``FileWatch`` whether the path still names the
file its connections have open: when the file was replaced they are dropped (new ones open
the new file, and ``on_replaced`` runs); when it was deleted they are dropped and the call is
refused (``StoreFileMissing``). A deleted file is never read through a connection kept open.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable

from pipeline.errors import StoreFileMissing, StoreUnavailable
from pipeline.store.sqlite.file_watch import REPLACED, FileWatch

log = logging.getLogger("memory.store")

#: connections one process keeps to one file for its store calls: SQLite runs one writer at
#: a time and a store call is short (model calls happen outside), so a few readers beside the
#: writer keep the two cores busy; a caller past them waits (at most the busy timeout)
MAX_CONNECTIONS = 4


class Pool:
    """At most ``size`` connections of this process, lent one per store call. After a fork
    the child starts empty: the parent's connections stay the parent's."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], *, size: int, wait_s: float, path: str) -> None:
        self._connect, self.size, self.wait_s, self.path = connect, size, wait_s, path
        self._watch: FileWatch | None = None
        self._on_replaced: Callable[[], None] | None = None
        self._cond = threading.Condition()
        self._pid = os.getpid()
        self._idle: list[sqlite3.Connection] = []
        self._mine: list[sqlite3.Connection] = []  # every one opened and not closed

    def checkout(self) -> sqlite3.Connection:
        # about to open a connection: look now, since connecting to a missing path would
        # create an empty file there (read unlocked: a wrong guess only delays the look)
        self._look(now=not self._idle and len(self._mine) < self.size)
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            if self._pid != os.getpid():
                self._pid, self._idle, self._mine = os.getpid(), [], []
            while not self._idle and len(self._mine) >= self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreUnavailable(f"SQLite store {self.path}: all {self.size} connections of this "
                                           f"process stayed busy for {self.wait_s:g} s")
                self._cond.wait(left)
            if self._idle:
                return self._idle.pop()
            placeholder = object()  # holds the place while the connection opens outside the lock
            self._mine.append(placeholder)  # type: ignore[arg-type]
        try:
            conn = self._connect()
        except BaseException:
            with self._cond:
                self._mine.remove(placeholder)  # type: ignore[arg-type]
                self._cond.notify()
            raise
        with self._cond:
            self._mine[self._mine.index(placeholder)] = conn  # type: ignore[arg-type]
        return conn

    def checkin(self, conn: sqlite3.Connection) -> None:
        with self._cond:
            if self._pid != os.getpid():
                return  # lent before a fork: the parent's
            if any(conn is c for c in self._mine):
                if conn.in_transaction:  # a statement left one open: the next caller starts clean
                    conn.rollback()
                self._idle.append(conn)
                self._cond.notify()
                return
        conn.close()  # the pool was closed while it was lent

    def watch(self, watch: FileWatch, *, on_replaced: Callable[[], None]) -> None:
        """From now on, check ``watch`` before lending a connection (module docstring)."""
        self._watch, self._on_replaced = watch, on_replaced

    def _look(self, *, now: bool = False) -> None:
        if self._watch is None:
            return
        try:
            seen = self._watch.check(now=now)
        except StoreFileMissing:
            self.close()
            raise
        if seen == REPLACED:
            log.warning("SQLite store %s: the file was replaced; reopening it", self.path)
            self.close()  # idle connections now, lent ones when given back
            if self._on_replaced is not None:
                self._on_replaced()

    def close(self) -> None:
        with self._cond:
            if self._pid != os.getpid():
                self._pid, self._idle, self._mine = os.getpid(), [], []
                return
            idle, self._idle, self._mine = self._idle, [], []
            self._cond.notify_all()
        for conn in idle:
            conn.close()


def borrowing(cls: type) -> type:
    """Class decorator of a store on ``self.db``: each public method runs on one connection
    borrowed from the pool for the call (``Database.borrowed``); a generator method holds it
    while it is iterated."""
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, method in vars(klass).items():
            if name.startswith("_") or name == "close" or not inspect.isfunction(method):
                continue
            if getattr(method, "__isabstractmethod__", False) or getattr(cls.__dict__.get(name), "_borrows", False):
                continue
            setattr(cls, name, _borrowing(getattr(cls, name)))
    return cls


def _borrowing(method):
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def iterate(self, *args, **kwargs):
            with self.db.borrowed():
                yield from method(self, *args, **kwargs)

        iterate._borrows = True
        return iterate

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with self.db.borrowed():
            return method(self, *args, **kwargs)

    call._borrows = True
    return call
