"""A SQLite connection lives as long as the thread that opened it: short-lived threads do not
leave connections (and their file handles) behind until the store is closed."""

from __future__ import annotations

import os
import threading

from tests.support.procstat import handles_on
from pipeline.store.sqlite import SQLiteStore


def _use_in_a_thread(store: SQLiteStore) -> None:
    thread = threading.Thread(target=lambda: store.get_agent_settings("a1"))
    thread.start()
    thread.join()


def test_connections_of_ended_threads_are_closed(tmp_path):
    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.create_indexes()
    try:
        _use_in_a_thread(store)
        baseline = handles_on(os.getpid(), "memory.db")
        for _ in range(50):
            _use_in_a_thread(store)
        # this thread's connection and the last thread's, whose end is noticed by the next one
        assert store.db.open_connections() <= 2
        assert handles_on(os.getpid(), "memory.db") <= baseline + 3  # at most one connection's files more
    finally:
        store.close()
    assert handles_on(os.getpid(), "memory.db") == 0


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
