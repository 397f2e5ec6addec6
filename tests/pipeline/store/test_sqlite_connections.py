"""A SQLite connection lives as long as the thread that opened it: short-lived threads do not
leave connections (and their file handles) behind until the store is closed."""

from __future__ import annotations

import os
import threading

from testkit.procstat import handles_on
from pipeline.store.sqlite import SQLiteStore


def _use_in_a_thread(store: SQLiteStore) -> None:
    thread = threading.Thread(target=lambda: store.ingest.get_agent_settings("a1"))
    thread.start()
    thread.join()


def _handles(tmp_path) -> int:
    """This process's descriptors on this test's database, its WAL and shared memory (the whole
    path: a file of another test, in the same xdist worker, is not this store's)."""
    return handles_on(os.getpid(), str(tmp_path / "memory.db"))


def test_connections_of_ended_threads_are_closed(tmp_path):
    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.create_indexes()
    try:
        _use_in_a_thread(store)
        baseline = _handles(tmp_path)
        for _ in range(50):
            _use_in_a_thread(store)
        # this thread's connection and the last thread's, whose end is noticed by the next one
        assert store.db.open_connections() <= 2
        assert _handles(tmp_path) <= baseline + 3  # at most one connection's files more
    finally:
        store.close()
    assert _handles(tmp_path) == 0


def test_a_live_thread_keeps_its_connection_while_others_come_and_go(tmp_path):
    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.create_indexes()
    first = store.db.conn()
    try:
        for _ in range(5):
            _use_in_a_thread(store)
        assert store.db.conn() is first
        assert first.execute("SELECT 1").fetchone() == (1,)
    finally:
        store.close()


def test_a_pool_of_many_live_threads_shares_a_bounded_set_of_connections(tmp_path):
    """A threads worker's 32 pool threads all live as long as the worker: the connections (and
    file handles) of the store follow the pool's bound, not the number of threads that ever
    called it."""
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.store.sqlite.pool import MAX_CONNECTIONS

    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.create_indexes()
    threads = 32
    start = threading.Barrier(threads)

    def call(n: int) -> int:
        start.wait(timeout=30)  # every thread alive and calling at once
        for _ in range(20):
            store.ingest.get_agent_settings(f"a{n}")
            store.ingest.count_messages(f"s{n}")
        return _handles(tmp_path)

    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            peak = max(pool.map(call, range(threads)))
            assert store.db.open_connections() <= MAX_CONNECTIONS
            # each connection holds the database and its WAL open; the shared-memory index once
            assert peak <= 2 * MAX_CONNECTIONS + 1
            assert _handles(tmp_path) <= 2 * MAX_CONNECTIONS + 1
    finally:
        store.close()
    assert _handles(tmp_path) == 0
