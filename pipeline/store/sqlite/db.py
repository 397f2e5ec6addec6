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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from pipeline.store._common import ts
from pipeline.store._sqlite_pool import MAX_CONNECTIONS, Pool

from pipeline.errors import StoreUnavailable

BUSY_TIMEOUT_S = 60.0

# Primary result codes (the low byte of an extended code): https://www.sqlite.org/rescode.html
# SQLITE_BUSY (5): another connection holds a conflicting lock past the busy timeout.
# SQLITE_LOCKED (6): a conflict inside one shared-cache connection group (same meaning here).
_NOT_NOW = {5: "SQLITE_BUSY", 6: "SQLITE_LOCKED"}

# (table, DDL body). Every table keeps the whole document as JSON in ``doc`` plus the columns
# that are queried or unique. Unique keys never hold NULL: scope keys are computed strings.
_TABLES: tuple[tuple[str, str], ...] = (
    ("agents", "agent_id TEXT PRIMARY KEY, doc TEXT NOT NULL"),
    ("messages", """
        event_id TEXT NOT NULL, session_id TEXT NOT NULL, message_id TEXT NOT NULL,
        agent_id TEXT NOT NULL, seq INTEGER NOT NULL, sender_id TEXT, created_at TEXT NOT NULL,
        doc TEXT NOT NULL"""),
    ("sessions", """
        session_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, last_activity_at TEXT,
        unclaimed INTEGER NOT NULL DEFAULT 0, active_run_id TEXT, doc TEXT NOT NULL"""),
    ("runs", """
        run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        status TEXT NOT NULL, lease_expires_at TEXT, created_at TEXT NOT NULL,
        doc TEXT NOT NULL"""),
    ("facts", """
        fact_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, scope_key TEXT NOT NULL,
        hash TEXT NOT NULL, scope TEXT NOT NULL, user_id TEXT, content TEXT NOT NULL,
        embedding BLOB, embedding_model TEXT, formed_at TEXT NOT NULL, retired_at TEXT,
        doc TEXT NOT NULL, updated_at TEXT, search_text TEXT"""),
    ("reflections", """
        reflection_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, scope_key TEXT NOT NULL,
        absorbed INTEGER NOT NULL DEFAULT 0, formed_at TEXT NOT NULL, doc TEXT NOT NULL"""),
    ("consolidated", """
        agent_id TEXT NOT NULL, scope_key TEXT NOT NULL, version INTEGER NOT NULL,
        doc TEXT NOT NULL, PRIMARY KEY (agent_id, scope_key)"""),
    ("rejected", "rejection_id TEXT PRIMARY KEY, received_at TEXT NOT NULL, doc TEXT NOT NULL"),
    ("scope_versions", """
        agent_id TEXT NOT NULL, scope_key TEXT NOT NULL, version INTEGER NOT NULL,
        PRIMARY KEY (agent_id, scope_key)"""),
    ("contexts", """
        session_id TEXT NOT NULL, user_id TEXT NOT NULL, doc TEXT NOT NULL,
        PRIMARY KEY (session_id, user_id)"""),
    ("leases", "name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TEXT NOT NULL"),
    ("usage", "usage_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, at TEXT NOT NULL, doc TEXT NOT NULL"),
    # access control (``_sqlite_access``): keys by the digest of their secret, the audit log,
    # queued jobs, and each user's own memory switch per agent
    ("api_keys", "key_id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, doc TEXT NOT NULL"),
    ("audit", "audit_id TEXT PRIMARY KEY, at TEXT NOT NULL, action TEXT NOT NULL, doc TEXT NOT NULL"),
    ("jobs", "job_id TEXT PRIMARY KEY, doc TEXT NOT NULL"),
    ("user_switches", """
        agent_id TEXT NOT NULL, user_id TEXT NOT NULL, enabled INTEGER NOT NULL, updated_at TEXT NOT NULL,
        PRIMARY KEY (agent_id, user_id)"""),
)

# (index name suffix, table, columns, unique). A unique key that holds only some rows says so
# in _PARTIAL.
_INDEXES: tuple[tuple[str, str, str, bool], ...] = (
    ("messages_event_id", "messages", "event_id", True),
    ("messages_session_message", "messages", "session_id, message_id", True),
    ("messages_session_seq", "messages", "session_id, seq", True),
    ("messages_sender", "messages", "sender_id", False),
    ("sessions_cold", "sessions", "active_run_id, last_activity_at", False),
    ("sessions_agent", "sessions", "agent_id", False),
    ("runs_status_lease", "runs", "status, lease_expires_at", False),
    ("runs_session", "runs", "session_id, created_at", False),
    ("runs_created", "runs", "created_at", False),
    # an agent's runs, newest first (``list_runs(agent_id=...)``: runs, cost)
    ("runs_agent_created", "runs", "agent_id, created_at", False),
    ("facts_scope_hash", "facts", "agent_id, scope_key, hash", True),
    ("facts_scope_formed", "facts", "agent_id, scope_key, formed_at", False),
    ("facts_model", "facts", "embedding_model", False),
    ("facts_scope_updated", "facts", "agent_id, scope_key, updated_at", False),
    ("facts_unchanged", "facts", "fact_id", False),
    ("facts_scope_model_formed", "facts", "agent_id, scope_key, embedding_model, formed_at", False),
    ("reflections_scope", "reflections", "agent_id, scope_key, absorbed, formed_at", False),
    ("rejected_received", "rejected", "received_at", False),
    ("usage_agent_at", "usage", "agent_id, at", False),
    # an erasure drops every cached context of an agent it changed (``erase_memory``)
    ("contexts_agent", "contexts", "json_extract(doc, '$.agent_id')", False),
    # provenance queries under every agent (``_sqlite_provenance``): a user's own scope key,
    # their cached contexts, and blob text no merge made
    ("facts_scope_key", "facts", "scope_key", False),
    ("reflections_scope_key", "reflections", "scope_key", False),
    ("consolidated_scope_key", "consolidated", "scope_key", False),
    ("scope_versions_scope_key", "scope_versions", "scope_key", False),
    ("contexts_user", "contexts", "user_id", False),
    ("consolidated_last_run", "consolidated", "json_extract(doc, '$.last_run_id')", False),
    ("audit_at", "audit", "at", False),
    ("user_switches_user", "user_switches", "user_id", False),
    # statistics (port_stats): an agent's runs by time (runs_agent_created above), usage
    # records by session and by run
    ("usage_session", "usage", "json_extract(doc, '$.session_id')", False),
    ("usage_run", "usage", "json_extract(doc, '$.run_id')", False),
    ("runs_unsummed", "runs", "run_id", False),
)

# Only live facts hold their text exclusively: a retired fact must not block the same text
# from being formed again later (it is a new fact then, and the retired one stays as it was).
_PARTIAL = {"facts_scope_hash": "retired_at IS NULL",
            # rows still to backfill (none once upgraded): opening a big file stays cheap
            "facts_unchanged": "updated_at IS NULL",
            "runs_unsummed": "usage IS NULL"}

TABLES = tuple(name for name, _ in _TABLES)

# Columns added after a table was first shipped: (table, column, type). A file made before
# gets them with ALTER TABLE when opened, then ``_backfill`` fills them from the documents.
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("facts", "updated_at", "TEXT"),
    # Fact.search_text; NULL on a fact written before: search reads its content then
    ("facts", "search_text", "TEXT"),
    # what the statistics sum, beside the document (_sqlite_stats): NULL until backfilled
    ("runs", "usage", "TEXT"),
    ("runs", "user_ids", "TEXT"),
)


class Database:
    """Connections to one SQLite file. ``:memory:`` uses one shared connection under a lock."""

    def __init__(self, path: str, prefix: str, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
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
        # the connections store calls borrow (``borrowed``)
        self.pool = Pool(lambda: self._connect(pooled=True), size=MAX_CONNECTIONS, wait_s=busy_timeout_s, path=path)
        if not self._memory:
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
        with self.borrowed():
            self.create_schema()

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

    # ------------------------------------------------------------------ schema -------------
    def create_schema(self) -> list[str]:
        names = []
        with self.write() as conn:
            for table, body in _TABLES:
                conn.execute(f"CREATE TABLE IF NOT EXISTS {self.t(table)} ({body})")
            for table, column, kind in _ADDED_COLUMNS:
                present = {row[1] for row in conn.execute(f"PRAGMA table_info({self.t(table)})").fetchall()}
                if column not in present:
                    conn.execute(f"ALTER TABLE {self.t(table)} ADD COLUMN {column} {kind}")
            for suffix, table, columns, unique in _INDEXES:
                name = f"{self.prefix}{suffix}"
                kind = "UNIQUE INDEX" if unique else "INDEX"
                where = f" WHERE {_PARTIAL[suffix]}" if suffix in _PARTIAL else ""
                existing = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
                                        (name,)).fetchone()
                if existing and where and not existing[0].endswith(where):
                    conn.execute(f'DROP INDEX "{name}"')  # a file made before the key became partial
                conn.execute(f'CREATE {kind} IF NOT EXISTS "{name}" ON {self.t(table)} ({columns}){where}')
                names.append(name)
            self._backfill(conn)
            from pipeline.store._sqlite_provenance import create_provenance_schema

            names += create_provenance_schema(conn, self.t, self.prefix)
        return names

    def _backfill(self, conn: sqlite3.Connection) -> None:
        """Facts written before ``updated_at`` was a column: their latest change is the
        document's ``updated_at`` (an UPDATE set it) or else ``formed_at``. Runs written before
        ``usage`` and ``user_ids`` were columns: from their documents."""
        from pipeline.store._sqlite_stats import BACKFILL

        conn.execute(BACKFILL.format(runs=self.t("runs")))
        facts = self.t("facts")
        conn.execute(f"UPDATE {facts} SET updated_at = formed_at WHERE updated_at IS NULL "
                     "AND json_extract(doc, '$.updated_at') IS NULL")
        for fact_id, changed in conn.execute(
            f"SELECT fact_id, json_extract(doc, '$.updated_at') FROM {facts} WHERE updated_at IS NULL"
        ).fetchall():
            conn.execute(f"UPDATE {facts} SET updated_at = ? WHERE fact_id = ?",
                         (ts(datetime.fromisoformat(changed)), fact_id))


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
