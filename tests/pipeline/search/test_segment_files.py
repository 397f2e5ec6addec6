"""Segments as memory-mapped files: the same answers as segments in memory, a new version when
the scope's stamp moves, one builder among concurrent processes, and no reuse of another
store's files."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.search.local import LocalFactSearch
from pipeline.search.segment_files import SegmentFiles
from pipeline.store.sqlite import SQLiteStore
from testkit.documents import fact

DIM = 32
WORDS = ["budget", "venue", "catering", "lighting", "stream", "press", "travel", "menu", "stage", "guest"]


def _fill(store: SQLiteStore, n: int, seed: int, prefix: str = "f") -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i in range(n):
        content = f"The {WORDS[i % 10]} note {i} mentions {WORDS[(i * 7) % 10]} and code{i % 97}"
        store.facts.insert_fact(fact(f"{prefix}{i:05d}", content, embedding=vectors[i].tolist(), model="m"))
    store.leases.bump_scope_versions("a1", ["agent"])
    return vectors


@pytest.fixture
def store(tmp_path):
    opened = SQLiteStore(str(tmp_path / "memory.db"))
    opened.create_indexes()
    yield opened
    opened.close()


@pytest.mark.parametrize("quantize_min", [1000, 10**9])
def test_mapped_segments_answer_as_segments_in_memory(store, tmp_path, quantize_min):
    vectors = _fill(store, 1500, seed=3)
    memory = LocalFactSearch(store, quantize_min=quantize_min)
    mapped = LocalFactSearch(store, quantize_min=quantize_min, segment_dir=str(tmp_path / "segments"))
    rng = np.random.default_rng(4)
    for q in vectors[rng.integers(0, len(vectors), 15)] + 0.05 * rng.standard_normal((15, DIM)).astype(np.float32):
        assert mapped.semantic("a1", ["agent"], "m", q.tolist(), 10, 0.5) == memory.semantic("a1", ["agent"], "m", q.tolist(), 10, 0.5)
    for query in ("budgt venue", "code42", "lighting stream press"):
        assert mapped.text("a1", ["agent"], query, 10, None) == memory.text("a1", ["agent"], query, 10, None)
    (folder,) = [p for p in (tmp_path / "segments").iterdir() if p.is_dir()]
    assert (folder / "meta.json").exists()
    (stamp, segment), = mapped._segments.values()
    assert isinstance(segment.has_vector, np.memmap) or isinstance(segment.has_vector.base, np.memmap)


def test_a_moved_stamp_gives_a_new_version_and_removes_the_old_one(store, tmp_path):
    _fill(store, 50, seed=5)
    directory = tmp_path / "segments"
    search = LocalFactSearch(store, segment_dir=str(directory))
    assert search.text("a1", ["agent"], "Zanzibar", 10, None) == []
    before = {p.name for p in directory.iterdir() if p.is_dir()}
    store.facts.insert_fact(fact("new", "The team flies to Zanzibar", embedding=[1.0] + [0.0] * (DIM - 1), model="m"))
    store.leases.bump_scope_versions("a1", ["agent"])
    assert [h.fact_id for h in search.text("a1", ["agent"], "Zanzibar", 10, None)] == ["new"]
    after = {p.name for p in directory.iterdir() if p.is_dir()}
    assert len(before) == len(after) == 1 and before != after
    # another process (a fresh search over the same directory) maps the new version, not the old
    assert [h.fact_id for h in LocalFactSearch(store, segment_dir=str(directory)).text("a1", ["agent"], "Zanzibar", 10, None)] == ["new"]


def test_files_left_by_another_store_are_rebuilt_not_served(tmp_path):
    directory = str(tmp_path / "segments")
    first = SQLiteStore(str(tmp_path / "first.db"))
    first.create_indexes()
    _fill(first, 30, seed=6, prefix="old")
    LocalFactSearch(first, segment_dir=directory).text("a1", ["agent"], "budget", 10, None)
    first.close()
    # a new store at another path, same agent, same stamps and as many facts, other ids
    second = SQLiteStore(str(tmp_path / "second.db"))
    second.create_indexes()
    _fill(second, 30, seed=6, prefix="new")
    hits = LocalFactSearch(second, segment_dir=directory).text("a1", ["agent"], "budget", 10, None)
    assert hits and all(h.fact_id.startswith("new") for h in hits)
    second.close()


def _build_in_a_process(directory: str, log: str, start_at: float) -> list[str]:
    """A worker process asking for the same segment as the others at the same moment."""
    from pipeline.search.segment import Segment
    from pipeline.store.port import FactCandidate
    from datetime import datetime, timezone

    def build():
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
        time.sleep(0.3)  # a build takes a while: the others must wait, not build too
        t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
        return Segment.build([FactCandidate(f"f{i}", "agent", None, f"note {i}", [1.0, float(i)], t0)
                              for i in range(20)], "m")

    time.sleep(max(0.0, start_at - time.time()))
    segment = SegmentFiles(directory).load_or_build("a1", "agent", "m", (1, 0), build, lambda s: True)
    return [segment.ids[i] for i in range(segment.size)]


def test_concurrent_processes_build_a_segment_once_and_share_its_file(tmp_path):
    directory, log = str(tmp_path / "segments"), str(tmp_path / "builds.log")
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 3.0  # after every process has started
    with context.Pool(4) as pool:
        answers = pool.starmap(_build_in_a_process, [(directory, log, start_at)] * 4)
    assert len(Path(log).read_text().split()) == 1
    assert all(answer == [f"f{i}" for i in range(20)] for answer in answers)
    assert len([p for p in Path(directory).iterdir() if p.is_dir()]) == 1
    assert not [p for p in Path(directory).iterdir() if ".tmp-" in p.name]



def test_a_newer_version_stays_and_a_dead_writers_leftovers_go(tmp_path):
    files = SegmentFiles(tmp_path)
    from pipeline.search.segment import Segment
    from pipeline.store.port import FactCandidate
    from datetime import datetime, timezone

    def build(n):
        t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
        return lambda: Segment.build([FactCandidate(f"f{i}", "agent", None, "note", [1.0, 0.5], t0) for i in range(n)], "m")

    files.load_or_build("a1", "user:u1", "m", (3, 7), build(3), lambda s: True)
    name = files.path("a1", "user:u1", "m", (3, 7)).name.rsplit("-", 2)[0]
    (tmp_path / f"{name}-1-7.tmp-999999-dead").mkdir()
    # a process that read the stamps before the last change asks for an older version:
    # it gets it, and the newer one stays
    older = files.load_or_build("a1", "user:u1", "m", (2, 7), build(2), lambda s: True)
    assert older.size == 2
    kept = sorted("-".join(p.name.rsplit("-", 2)[1:]) for p in tmp_path.iterdir() if p.is_dir())
    assert kept == ["2-7", "3-7"]
    # an erasure drops the user's stamp and moves the agent's: that version is newer than both
    files.load_or_build("a1", "user:u1", "m", (1, 8), build(1), lambda s: True)
    assert sorted("-".join(p.name.rsplit("-", 2)[1:]) for p in tmp_path.iterdir() if p.is_dir()) == ["1-8"]


def test_the_term_table_finds_what_the_dict_finds_long_and_accented_terms_included():
    from pipeline.search.text_index import TermTable

    terms = {"budget": 0, "café": 1, "x" * 60: 2, "zanzibar": 3, "ref42": 4}
    table = TermTable(*TermTable.pack(terms))
    assert all(table[t] == n for t, n in terms.items())
    asked = ["budget", "budge", "café", "cafe", "x" * 60, "x" * 59, "zanzibars", "ref42", ""]
    assert table.contains_many(asked) == [t in terms for t in asked]
    assert sorted(table) == sorted(terms) and len(table) == len(terms)
    with pytest.raises(KeyError):
        table["nothing"]


def test_files_of_an_older_format_are_rebuilt(store, tmp_path):
    import json

    _fill(store, 20, seed=8)
    directory = tmp_path / "segments"
    LocalFactSearch(store, segment_dir=str(directory)).text("a1", ["agent"], "budget", 10, None)
    (folder,) = [p for p in directory.iterdir() if p.is_dir()]
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "format": 0}))
    hits = LocalFactSearch(store, segment_dir=str(directory)).text("a1", ["agent"], "budget", 10, None)
    assert hits and json.loads((folder / "meta.json").read_text())["format"] != 0


def test_an_erased_users_segment_files_go_with_the_next_search_of_the_agent(store, tmp_path):
    _fill(store, 20, seed=9)
    store.facts.insert_fact(fact("maya-1", "Maya lives in Porto", user="u1", embedding=[1.0] + [0.0] * (DIM - 1), model="m"))
    store.leases.bump_scope_versions("a1", ["user:u1"])
    directory = tmp_path / "segments"
    search = LocalFactSearch(store, segment_dir=str(directory))
    assert [h.fact_id for h in search.text("a1", ["agent", "user:u1"], "Porto", 10, None)] == ["maya-1"]
    assert len([p for p in directory.iterdir() if p.is_dir()]) == 2
    # an erasure moves the agent's stamp; another user's search of the agent follows
    store.leases.bump_scope_versions("a1", ["agent"])
    LocalFactSearch(store, segment_dir=str(directory)).text("a1", ["agent", "user:u2"], "budget", 10, None)
    left = [p for p in directory.iterdir() if p.is_dir()]
    assert left and not any(word in f.read_bytes() for p in left for f in p.iterdir() for word in (b"maya-1", b"porto"))
