"""Claims and exact-duplicate facts under real concurrency (design §4, §5.3).

SQLite: 8 processes on one database file. Both adapters (the ``store`` fixture): 8 threads,
Mongo on the locked emulation. Whatever
the interleaving, every message belongs to exactly one run's range: no overlap, no gap.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipeline.trigger import ClaimRule
from pipeline.store.sqlite import SQLiteStore
from testkit.documents import at, fact, message, run

WORKERS = 8
MESSAGES_EACH = 15
ANY = ClaimRule(min_messages=1)

# spawn, not fork: a fork of a process that already runs threads (BLAS, onnxruntime, a search
# rebuild) can inherit a lock held by one of them and hang; separate workers start fresh too
_PROCS = multiprocessing.get_context("spawn")


def _ingest_and_claim(store, worker: int, wait) -> list[str]:
    """Ingest this worker's messages, trying to claim after each one; a won run finishes at
    once (so the next range can be claimed). Returns the run ids this worker won."""
    wait()
    won = []
    for i in range(MESSAGES_EACH):
        n = worker * 1000 + i
        store.ingest.ingest_message(message(n, event_id=f"w{worker}-e{i}", created=at(i)), at(i))
        claimed = store.runs.try_claim("s1", ANY, run(f"r-{worker}-{i}"), at(i), 600)
        if claimed is not None:
            won.append(claimed.run_id)
            if i % 3:  # leave some runs live a little longer, so rivals see a held claim
                store.runs.finish_run(claimed.run_id, at(i), {}, [])
            else:
                store.runs.try_claim("s1", ANY, run(f"r-{worker}-{i}-again"), at(i), 600)  # refused: held
                store.runs.finish_run(claimed.run_id, at(i), {}, [])
    return won


def _process_worker(path: str, worker: int, barrier, results) -> None:
    store = SQLiteStore(path)
    results.put((worker, _ingest_and_claim(store, worker, barrier.wait)))
    store.close()


def _assert_ranges_tile_the_session(store) -> None:
    session = store.ingest.get_session("s1")
    assert session.last_seq == WORKERS * MESSAGES_EACH
    tail = store.runs.try_claim("s1", ANY, run("r-tail"), at(999), 600)
    runs = store.runs.list_runs(session_id="s1", limit=10_000)
    ranges = sorted((r.seq_from, r.seq_to) for r in runs)
    assert ranges[0][0] == 1
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert start == end + 1, f"overlap or gap between ranges: {ranges}"
    assert ranges[-1][1] == session.last_seq
    assert tail is None or tail.seq_to == session.last_seq
    seqs = [m.seq for m in store.ingest.get_messages("s1", 1, session.last_seq)]
    assert sorted(seqs) == list(range(1, session.last_seq + 1))


def _run_processes(path: str, target, args_of) -> list:
    barrier = _PROCS.Barrier(WORKERS)
    results = _PROCS.Queue()
    procs = [_PROCS.Process(target=target, args=(path, w, barrier, results, *args_of(w))) for w in range(WORKERS)]
    for p in procs:
        p.start()
    collected = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return collected


def test_processes_racing_ingest_and_claims_on_sqlite_form_each_message_exactly_once(tmp_path):
    path = str(tmp_path / "race.db")
    SQLiteStore(path).close()  # schema created once, before the race
    won = _run_processes(path, _process_worker, lambda w: ())
    store = SQLiteStore(path)
    assert sum(len(runs) for _, runs in won) >= 1
    _assert_ranges_tile_the_session(store)


def test_threads_racing_ingest_and_claims_form_each_message_exactly_once(store):
    barrier = threading.Barrier(WORKERS)
    with ThreadPoolExecutor(WORKERS) as pool:
        won = list(pool.map(lambda w: _ingest_and_claim(store, w, barrier.wait), range(WORKERS)))
    assert sum(len(runs) for runs in won) >= 1
    _assert_ranges_tile_the_session(store)


def _claim_once(path: str, worker: int, barrier, results) -> None:
    store = SQLiteStore(path)
    barrier.wait()
    claimed = store.runs.try_claim("s1", ANY, run(f"r{worker}"), at(100), 600)
    results.put(None if claimed is None else (claimed.seq_from, claimed.seq_to))


def _insert_same_fact(path: str, worker: int, barrier, results) -> None:
    store = SQLiteStore(path)
    barrier.wait()
    results.put(store.facts.insert_fact(fact(f"f{worker}", "The launch is on March 3")))


@pytest.fixture
def ten_messages(tmp_path):
    path = str(tmp_path / "race.db")
    store = SQLiteStore(path)
    for n in range(1, 11):
        store.ingest.ingest_message(message(n), at(n))
    store.close()
    return path


def test_processes_racing_one_claim_on_sqlite_have_exactly_one_winner(ten_messages):
    results = _run_processes(ten_messages, _claim_once, lambda w: ())
    assert sorted(results, key=str) == [(1, 10)] + [None] * (WORKERS - 1)
    assert len(SQLiteStore(ten_messages).runs.list_runs()) == 1


def test_threads_racing_one_claim_have_exactly_one_winner(store):
    for n in range(1, 11):
        store.ingest.ingest_message(message(n), at(n))
    barrier = threading.Barrier(WORKERS)

    def claim(w):
        barrier.wait()
        return store.runs.try_claim("s1", ANY, run(f"r{w}"), at(100), 600)

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(claim, range(WORKERS)))
    assert sorted((r.seq_from, r.seq_to) for r in results if r) == [(1, 10)]
    assert len(store.runs.list_runs()) == 1


def test_processes_racing_the_same_fact_on_sqlite_store_it_once(tmp_path):
    path = str(tmp_path / "race.db")
    SQLiteStore(path).close()
    results = _run_processes(path, _insert_same_fact, lambda w: ())
    inserted = [fact_id for ok, fact_id in results if ok]
    assert len(inserted) == 1
    assert {fact_id for _, fact_id in results} == set(inserted)
    assert [f.fact_id for f in SQLiteStore(path).facts.list_facts("a1")] == inserted


def test_threads_racing_the_same_fact_store_it_once(store):
    barrier = threading.Barrier(WORKERS)

    def insert(w):
        barrier.wait()
        return store.facts.insert_fact(fact(f"f{w}", "The launch is on March 3"))

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(insert, range(WORKERS)))
    inserted = [fact_id for ok, fact_id in results if ok]
    assert len(inserted) == 1 and {fact_id for _, fact_id in results} == set(inserted)


def test_threads_racing_the_text_of_a_retired_fact_bring_it_back_once(store):
    store.facts.insert_fact(fact("f-old", "The launch is on March 3"))
    store.facts.retire_fact("f-old", at(1), "r1")
    barrier = threading.Barrier(WORKERS)

    def insert(w):
        barrier.wait()
        return store.facts.insert_fact(fact(f"f{w}", "The launch is on March 3"))

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(insert, range(WORKERS)))
    inserted = [fact_id for ok, fact_id in results if ok]
    assert len(inserted) == 1 and {fact_id for _, fact_id in results} == set(inserted)
    assert [f.fact_id for f in store.facts.list_facts("a1")] == inserted


def test_threads_delivering_the_same_event_accept_it_once(store):
    barrier = threading.Barrier(WORKERS)

    def deliver(_):
        barrier.wait()
        return store.ingest.ingest_message(message(1), at(1))

    store.ingest.ingest_message(message(0), at(0))
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(deliver, range(WORKERS)))
    assert sorted(o.status for o in outcomes) == ["accepted"] + ["duplicate"] * (WORKERS - 1)
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.messages_since, session.duplicates) == (2, 2, WORKERS - 1)
    assert [m.seq for m in store.ingest.get_messages("s1", 1, 2)] == [1, 2]


def test_threads_declaring_users_while_messages_arrive_lose_no_one(store):
    barrier = threading.Barrier(WORKERS)

    def declare_and_ingest(w):
        barrier.wait()
        for i in range(5):
            store.ingest.declare_session_users("s1", "a1", [f"d{w}-{i}"])
            store.ingest.ingest_message(message(w * 100 + i, user=f"m{w}-{i}", event_id=f"w{w}-e{i}"), at(i))

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(declare_and_ingest, range(WORKERS)))
    users = store.ingest.get_session("s1").users
    expected = {f"{kind}{w}-{i}" for kind in "dm" for w in range(WORKERS) for i in range(5)}
    assert set(users) == expected and len(users) == len(expected)
