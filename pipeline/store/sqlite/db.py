"""SQLite plumbing for the store: schema, one connection per thread (and per process), and
write transactions that take the database's write lock up front (``BEGIN IMMEDIATE``).

Holding the write lock for a whole read-modify-write makes each store method atomic across
threads and processes alike; WAL mode lets readers go on meanwhile.

Threads of one process queue for the write lock on a Python lock first. SQLite's own busy
handler does not wait for the lock to be released: it sleeps 1, 2, 5, 10 ... 100 ms and tries
again, so with many worker threads a 1 ms transaction waited tens of ms behind the others.
The Python lock hands over as soon as the holder commits; other processes still meet the
busy handler (rarely: one worker process writes most).

Each call of a store method borrows one connection from a small per-process pool
(``MAX_CONNECTIONS``) and gives it back when it returns; calls nested in it, and the statements
of a generator method while it is iterated, use the same one. The connections a process holds
are so bounded by the pool, not by how many threads ever used the store: a threads worker
(32 pool threads, 8 dedup threads) opened one per thread, each with its file handles and its
own page cache, and kept them all, so its handles and heap grew with every new peak of
concurrency (15 -> 45 handles and 1.25 MB/min in a 12-minute soak). A caller that uses
``conn()`` outside a store method (tests, the schema set-up) gets a connection of its own
thread, closed once that thread has ended.

A lock held by another connection past the busy timeout (``SQLITE_BUSY``, ``SQLITE_LOCKED``)
is the one SQLite error that means "not now": ``unavailable`` turns it into
``StoreUnavailable``, which the workers retry. Schema, constraint and I/O errors stay as
they are.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from pipeline.errors import StoreUnavailable
from pipeline.store.sqlite.file_watch import FileWatch
from pipeline.store.sqlite.pool import MAX_CONNECTIONS, Pool

BUSY_TIMEOUT_S = 60.0

# Primary result codes (the low byte of an extended code): https://www.sqlite.org/rescode.html
# SQLITE_BUSY (5): another connection holds a conflicting lock past the busy timeout.
# SQLITE_LOCKED (6): a conflict inside one shared-cache connection group (same meaning here).
_NOT_NOW = {5: "SQLITE_BUSY", 6: "SQLITE_LOCKED"}

IN_CHUNK = 500  # keys per lookup query of a batch

#: what sets up the tables and indexes of a database and names them (``schema.create_schema``):
#: passed in, so that this module, which the schema's modules import, imports none of them
Schema = Callable[["Database"], list[str]]


class Database:
    """Connections to one SQLite file. ``:memory:`` uses one shared connection under a lock.
    ``schema`` is run when the file is opened, and again when it was found replaced."""

    def __init__(self, path: str, prefix: str, schema: Schema, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        self._schema = schema
        self.prefix = prefix
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._memory = path == ":memory:"
        self._memory_lock = threading.RLock()
        self._memory_conn: sqlite3.Connection | None = None
        # (pid, owning thread, connection) of every connection opened and not yet closed; the
        # one shared connection of ``:memory:`` has no owner
        self._all: list[tuple[int, threading.Thread | None, sqlite3.Connection]] = []
        self._all_lock = threading.Lock()
        self._writer_lock = threading.RLock()
        self._writer_pid = os.getpid()
        #: how many times the file at ``path`` was found replaced and reopened (a cache of its
        #: content, such as the search segments, is stale when this moves)
        self.generation = 0
        # the connections store calls borrow (``borrowed``)
        self.pool = Pool(lambda: self._connect(pooled=True), size=MAX_CONNECTIONS, wait_s=busy_timeout_s, path=path)
        if not self._memory:
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
        with self.borrowed():
            self.create_schema()
        if not self._memory:
            self.pool.watch(FileWatch(path), on_replaced=self._reopened)

    def _reopened(self) -> None:
        """The file at ``path`` is another one now: set it up as when the store was opened."""
        self.generation += 1
        with self.borrowed():
            self.create_schema()

    def create_schema(self) -> list[str]:
        """Every table and index of the store, created or upgraded (``schema``); their names."""
        return self._schema(self)

    def t(self, table: str) -> str:
        """The prefixed table name."""
        return f'"{self.prefix}{table}"'

    # ------------------------------------------------------------------ connections --------
    def _connect(self, *, pooled: bool = False) -> sqlite3.Connection:
        # check_same_thread=False only so that a connection can be closed once its thread has
        # ended (from another thread); while the thread lives, only it uses its connection.
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
        if not self._memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            # Memory-mapped reads load 100k search candidates (with their vectors) ~3x faster.
            conn.execute(f"PRAGMA mmap_size={1 << 30}")
        with self._all_lock:
            ended = [e for e in self._all if e[0] == os.getpid() and e[1] is not None and not e[1].is_alive()]
            self._all = [e for e in self._all if e not in ended]
            self._all.append((os.getpid(), None if self._memory or pooled else threading.current_thread(), conn))
        for _, _, old in ended:
            old.close()
        return conn

    def open_connections(self) -> int:
        """Connections of this process still open (one per live thread that used the store)."""
        with self._all_lock:
            return sum(1 for pid, _, _ in self._all if pid == os.getpid())

    def conn(self) -> sqlite3.Connection:
        """The connection of this call: the one a store method borrowed (``borrowed``), else
        one of this thread's own."""
        if self._memory:
            with self._memory_lock:
                if self._memory_conn is None:
                    self._memory_conn = _LockedConnection(self._connect(), self._memory_lock)
                return self._memory_conn
        local = self._local
        # A connection must never cross a fork: a child process opens its own.
        if getattr(local, "pid", None) != os.getpid() or local.conn is None:
            local.conn = self._connect()
            local.pid = os.getpid()
            local.lent = False
        return local.conn

    @contextmanager
    def borrowed(self) -> Iterator[None]:
        """Within the block, ``conn()`` is a connection lent by the pool (or the one this
        thread already holds: a nested call), given back at its end."""
        local = self._local
        if self._memory or (getattr(local, "pid", None) == os.getpid() and local.conn is not None):
            yield
            return
        conn = self.pool.checkout()
        local.conn, local.pid, local.lent = conn, os.getpid(), True
        try:
            yield
        finally:
            local.conn = None
            self.pool.checkin(conn)

    @contextmanager
    def _process_writer_lock(self) -> Iterator[None]:
        """This process's queue for the write lock (a fresh one after a fork: a lock held by
        a thread of the parent would never be released in the child), bounded like the busy
        timeout."""
        if self._writer_pid != os.getpid():
            self._writer_lock = threading.RLock()
            self._writer_pid = os.getpid()
        lock = self._writer_lock
        if not lock.acquire(timeout=self.busy_timeout_s):
            raise StoreUnavailable(
                f"SQLite store {self.path}: this process's other writers held the write lock for more than "
                f"{self.busy_timeout_s:g} s"
            )
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One atomic read-modify-write, holding the write lock from its first statement."""
        with self._memory_lock if self._memory else self._process_writer_lock():
            conn = self.conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for reads that take more than one statement."""
        with self._memory_lock if self._memory else _nothing():
            conn = self.conn()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        self.pool.close()  # idle ones now, lent ones when given back
        with self._all_lock:
            conns, self._all = self._all, []
        me = threading.current_thread()
        for pid, owner, conn in conns:
            if pid != os.getpid():
                continue  # inherited through a fork: the parent still owns it
            if owner is None and not self._memory:
                continue  # the pool's
            if owner is None or owner is me or not owner.is_alive():
                conn.close()
            # a live thread may be inside a statement on its own connection: that one is
            # dropped here and closes when the thread lets go of it
        self._local = threading.local()
        self._memory_conn = None


def unavailable(exc: BaseException) -> StoreUnavailable | None:
    """``StoreUnavailable`` for a lock held past the busy timeout, None for anything else."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _NOT_NOW:
        return None
    return StoreUnavailable(f"the SQLite store is locked by another connection past the busy timeout "
                            f"({_NOT_NOW[code & 0xFF]}: {exc})")


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


class _Result:
    """The fully fetched result of one statement, read after the lock is released."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.description = cursor.description
        self.rowcount = cursor.rowcount
        self._rows = cursor.fetchall() if cursor.description else []

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self):
        return iter(self.fetchall())


class _LockedConnection:
    """``:memory:`` has one connection for every thread: each statement runs under the lock
    (a write transaction holds it throughout), so no thread reads another's uncommitted rows."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock) -> None:
        self._conn = conn
        self._lock = lock

    def execute(self, sql: str, args: tuple | list = ()) -> _Result:
        with self._lock:
            return _Result(self._conn.execute(sql, args))

    def executemany(self, sql: str, rows) -> _Result:
        with self._lock:
            return _Result(self._conn.executemany(sql, rows))

    def close(self) -> None:
        self._conn.close()


def qmarks(values: Sequence[object]) -> str:
    """One ``?`` per value, for an ``IN (...)`` list."""
    return ", ".join("?" for _ in values)


def chunks(items: Sequence, size: int = IN_CHUNK) -> list[Sequence]:
    """``items`` cut in runs of ``size``: the keys of one lookup query of a batch."""
    return [items[i:i + size] for i in range(0, len(items), size)]
