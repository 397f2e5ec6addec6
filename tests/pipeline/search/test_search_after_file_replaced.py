"""The search cache follows a SQLite file replaced under the process: a store recreated at the
same path counts its scope stamps from the start again, so a segment cached for the old file
would answer with its facts (or none of the new ones) until the stamps moved past it."""

from __future__ import annotations

import time
from pathlib import Path

from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import SQLiteStore
from pipeline.store.sqlite.file_watch import CHECK_INTERVAL_S
from testkit.documents import fact


def _store_with(path: Path, fact_id: str, text: str) -> SQLiteStore:
    store = SQLiteStore(str(path))
    store.facts.insert_fact(fact(fact_id, text, agent="a1", user="u1"))
    store.leases.bump_scope_versions("a1", ["user:u1"])  # stamp 1, in the old file and the new one alike
    return store


def test_a_search_after_the_file_is_replaced_finds_the_new_files_facts(tmp_path):
    path = tmp_path / "memory.db"
    store = _store_with(path, "f-old", "Alice lives in Lyon")
    search = LocalFactSearch(store)
    assert [h.fact_id for h in search.text("a1", ["user:u1"], "Alice lives", 5, None)] == ["f-old"]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    _store_with(path, "f-new", "Alice lives in Porto").close()
    time.sleep(CHECK_INTERVAL_S + 0.1)  # the path is looked at once a second
    assert [h.fact_id for h in search.text("a1", ["user:u1"], "Alice lives", 5, None)] == ["f-new"]
    store.close()
