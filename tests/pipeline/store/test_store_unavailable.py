"""A store that is not there just now says so with ``StoreUnavailable`` (a transient error the
workers retry); every other driver error stays what it is."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from pymongo.errors import (
    AutoReconnect, DuplicateKeyError, NetworkTimeout, NotPrimaryError, OperationFailure,
    ServerSelectionTimeoutError, WriteError,
)

from pipeline.errors import StoreUnavailable, TransientError
from pipeline.store.mongo.unavailable import unavailable as mongo_unavailable
from pipeline.store.sqlite.db import unavailable as sqlite_unavailable
from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore
from schemas.documents import AgentSettings
from testkit.mongo_emulation import OUTAGE, emulated_database

LOCK_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def _hold_lock(path, seconds: float) -> subprocess.Popen:
    """Another process holds the write lock (``BEGIN EXCLUSIVE``) for ``seconds``."""
    proc = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.fixture
def sqlite_store(tmp_path):
    store = SQLiteStore(str(tmp_path / "memory.db"), busy_timeout_s=0.2)
    store.create_indexes()
    yield store
    store.close()


def test_a_write_behind_another_process_s_lock_past_the_busy_timeout_is_store_unavailable(sqlite_store, tmp_path):
    holder = _hold_lock(tmp_path / "memory.db", 2.0)
    try:
        with pytest.raises(StoreUnavailable, match="SQLITE_BUSY") as caught:
            sqlite_store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Ada"))
        assert isinstance(caught.value, TransientError)
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        # WAL: reads go on while the lock is held
        assert sqlite_store.ingest.get_agent_settings("a1").name is None
    finally:
        holder.wait(timeout=10)
    sqlite_store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Ada"))
    assert sqlite_store.ingest.get_agent_settings("a1").name == "Ada"


def test_a_lock_released_within_the_busy_timeout_is_waited_for(tmp_path):
    store = SQLiteStore(str(tmp_path / "memory.db"), busy_timeout_s=10)
    store.create_indexes()
    holder = _hold_lock(tmp_path / "memory.db", 0.5)
    try:
        store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Ada"))
    finally:
        holder.wait(timeout=10)
        store.close()


def test_this_process_s_writer_queue_past_the_busy_timeout_is_store_unavailable(sqlite_store):
    entered, release = threading.Event(), threading.Event()

    def hold():
        with sqlite_store.db.write():
            entered.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    entered.wait(5)
    try:
        with pytest.raises(StoreUnavailable, match="other writers"):
            sqlite_store.ingest.put_agent_settings(AgentSettings(agent_id="a1"))
    finally:
        release.set()
        holder.join()


@pytest.mark.parametrize("statement, error", [
    ("DROP TABLE \"memory2_agents\"", "no such table"),               # a schema error
])
def test_schema_errors_are_not_store_unavailable(sqlite_store, tmp_path, statement, error):
    raw = sqlite3.connect(tmp_path / "memory.db")
    raw.execute(statement)
    raw.commit()
    raw.close()
    with pytest.raises(sqlite3.OperationalError, match=error) as caught:
        sqlite_store.ingest.put_agent_settings(AgentSettings(agent_id="a1"))
    assert not isinstance(caught.value, StoreUnavailable)


def _sqlite_error(tmp_path, kind: str) -> sqlite3.Error:
    """A real error of the given kind from the sqlite3 module."""
    path = tmp_path / f"{kind}.db"
    conn = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES ('x')")
    statements = {
        "integrity": "INSERT INTO t VALUES ('x')",
        "schema": "SELECT * FROM missing",
        "syntax": "SELEC 1",
        "busy": "BEGIN IMMEDIATE",
    }
    holder = _hold_lock(path, 1.0) if kind == "busy" else None
    try:
        conn.execute(statements[kind])
    except sqlite3.Error as exc:
        return exc
    finally:
        if holder is not None:
            holder.wait(timeout=10)
        conn.close()
    raise AssertionError(f"{kind}: no error")


@pytest.mark.parametrize("kind, retryable", [
    ("busy", True), ("integrity", False), ("schema", False), ("syntax", False),
])
def test_only_busy_and_locked_sqlite_errors_are_store_unavailable(tmp_path, kind, retryable):
    assert isinstance(sqlite_unavailable(_sqlite_error(tmp_path, kind)), StoreUnavailable) is retryable


# ------------------------------------------------------------------ mongo --------------------------

def _labelled(code: int | None, labels: list[str]) -> OperationFailure:
    return OperationFailure("failed", code, {"ok": 0, "code": code, "errmsg": "x", "errorLabels": labels})


@pytest.mark.parametrize("error, retryable", [
    (AutoReconnect("connection closed"), True),
    (NetworkTimeout("timed out"), True),
    (ServerSelectionTimeoutError("no primary"), True),
    (NotPrimaryError("not primary", {"code": 10107, "errmsg": "not primary"}), True),
    (_labelled(189, []), True),                                 # PrimarySteppedDown
    (_labelled(91, []), True),                                  # ShutdownInProgress
    (_labelled(None, ["RetryableWriteError"]), True),
    (DuplicateKeyError("E11000 duplicate key", 11000), False),
    (WriteError("document failed validation", 121), False),
    (_labelled(2, []), False),                                  # BadValue: a bad query
    (_labelled(13, []), False),                                 # Unauthorized
    (ValueError("not a driver error"), False),
])
def test_only_the_driver_s_retryable_errors_are_store_unavailable(error, retryable):
    assert isinstance(mongo_unavailable(error), StoreUnavailable) is retryable


@pytest.fixture
def mongo_store():
    store = MongoStore(emulated_database(), prefix="memory2_")
    store.create_indexes()
    yield store
    OUTAGE.close()


def test_every_mongo_operation_during_a_failover_is_store_unavailable_and_works_after(mongo_store):
    with OUTAGE.during():
        for _ in range(20):
            with pytest.raises(StoreUnavailable) as caught:
                mongo_store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Ada"))
            assert isinstance(caught.value.__cause__, AutoReconnect)
        with pytest.raises(StoreUnavailable):
            mongo_store.ingest.get_agent_settings("a1")
        with pytest.raises(StoreUnavailable):
            list(mongo_store.facts.iter_facts_for_reembed(None, "other-model", 10))
    mongo_store.ingest.put_agent_settings(AgentSettings(agent_id="a1", name="Ada"))
    assert mongo_store.ingest.get_agent_settings("a1").name == "Ada"


def test_the_outage_window_closes_by_itself(mongo_store):
    OUTAGE.open(0.2)
    with pytest.raises(StoreUnavailable):
        mongo_store.runs.get_run("r1")
    time.sleep(0.3)
    assert mongo_store.runs.get_run("r1") is None


def test_opening_the_store_during_an_outage_is_store_unavailable(sqlite_store, tmp_path):
    # a worker process opens its store on its first task; SQLite creates its schema then
    holder = _hold_lock(tmp_path / "memory.db", 2.0)
    try:
        with pytest.raises(StoreUnavailable):
            SQLiteStore(str(tmp_path / "memory.db"), busy_timeout_s=0.2)
    finally:
        holder.wait(timeout=10)
    SQLiteStore(str(tmp_path / "memory.db"), busy_timeout_s=0.2).close()
