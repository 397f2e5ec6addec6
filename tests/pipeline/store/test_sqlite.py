"""What only the SQLite adapter promises: its URL forms, one persistent WAL file, ``:memory:``."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from pipeline.errors import ConfigurationError
from pipeline.store import open_store
from pipeline.trigger import ClaimRule
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings
from testkit.documents import at, fact, message, run


def test_data_survives_closing_and_reopening_the_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'nested' / 'memory.db'}"
    first = open_store(Settings(store_url=url))
    first.ingest.ingest_message(message(1), at(1))
    first.facts.insert_fact(fact("f1", "The office is in Paris", embedding=[0.5, 0.25]))
    first.close()
    second = SQLiteStore.from_url(url)
    assert second.ingest.get_session("s1").last_seq == 1
    assert second.facts.get_facts(["f1"])[0].embedding == [0.5, 0.25]
    second.close()


def test_the_file_is_in_wal_mode_with_prefixed_tables(tmp_path):
    path = tmp_path / "memory.db"
    SQLiteStore(str(path), prefix="test_").close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"test_facts", "test_messages", "test_sessions", "test_runs", "test_consolidated"} <= tables
    conn.close()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:/memory.db"])
def test_a_malformed_url_is_refused_with_the_expected_form(url):
    with pytest.raises(ConfigurationError, match="sqlite:///"):
        SQLiteStore.from_url(url)


def test_in_memory_store_is_shared_by_threads_and_claims_once():
    store = SQLiteStore.from_url("sqlite:///:memory:")
    for n in range(1, 6):
        store.ingest.ingest_message(message(n), at(n))
    barrier = threading.Barrier(6)
    results = []

    def claim(w):
        barrier.wait()
        results.append(store.runs.try_claim("s1", ClaimRule(min_messages=1), run(f"r{w}"), at(10), 60))

    threads = [threading.Thread(target=claim, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [(r.seq_from, r.seq_to) for r in results if r] == [(1, 5)]
    store.close()
