"""Big segments are scanned in int8 and rescored exactly: same ranking, exact scores, less memory."""

import threading

import numpy as np
import pytest

from pipeline.search.local import LocalFactSearch
from pipeline.search.segment import Segment, quantize
from pipeline.vectors import views as unpack_embeddings
from pipeline.store.sqlite import SQLiteStore
from tests.pipeline.search.fakes import CandidateStore

DIM = 384


def _clustered(rng, n, centres=40):
    """Unit vectors around a few centres, as real embeddings of one conversation are: many
    near-ties, which is where an approximate scan would reorder the top."""
    base = rng.standard_normal((centres, DIM)).astype(np.float32)
    rows = base[rng.integers(0, centres, n)] + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(11)
    vectors = _clustered(rng, 6000)
    store = CandidateStore()
    for i, v in enumerate(vectors):
        store.add("a", "agent", f"f{i}", f"fact number {i}", v.tolist(), minutes=i)
    queries = _clustered(rng, 60)
    return store, vectors, queries


def test_quantized_search_ranks_as_the_exact_scan_with_exact_scores(big):
    store, vectors, queries = big
    quantized = LocalFactSearch(store, quantize_min=1000)
    exact = LocalFactSearch(store, quantize_min=10**9)
    overlaps = []
    for q in queries:
        got = quantized.semantic("a", ["agent"], "m", q.tolist(), 10, None)
        want = exact.semantic("a", ["agent"], "m", q.tolist(), 10, None)
        overlaps.append(len({h.fact_id for h in got} & {h.fact_id for h in want}) / 10)
        for hit in got:   # the scores are exact float32 cosines, not int8 approximations
            row = int(hit.fact_id[1:])
            assert hit.score == pytest.approx((1 + float(vectors[row] @ (q / np.linalg.norm(q)))) / 2, abs=1e-5)
    assert np.mean(overlaps) >= 0.99


@pytest.mark.parametrize("threads", [2, 3])
def test_a_scan_split_over_threads_finds_the_same_rows_and_scores(big, threads):
    store, _, queries = big
    one = LocalFactSearch(store, quantize_min=1000)
    split = LocalFactSearch(store, quantize_min=1000, scan_threads=threads)
    for q in queries[:20]:
        assert split.semantic("a", ["agent"], "m", q.tolist(), 10, None) == one.semantic("a", ["agent"], "m", q.tolist(), 10, None)


def test_a_big_segment_holds_int8_codes_and_no_float32_matrix(big):
    store, _, _ = big
    search = LocalFactSearch(store, quantize_min=1000)
    search.semantic("a", ["agent"], "m", big[2][0].tolist(), 10, None)
    (stamp, segment), = search._segments.values()
    assert segment.quantized and segment.matrix is None and segment.codes.dtype == np.int8
    exact = Segment.build(store.facts.search_candidates("a", ["agent"], "m"), "m", quantize_min=10**9)
    assert segment.nbytes < exact.nbytes / 2


def test_quantized_rows_reconstruct_within_half_a_step():
    rng = np.random.default_rng(3)
    matrix = _clustered(rng, 200)
    matrix[5] = 0.0
    codes, scales = quantize(matrix)
    assert np.all(np.abs(codes.astype(np.float32) * scales[:, None] - matrix) <= scales[:, None] / 2 + 1e-7)
    assert not codes[5].any() and scales[5] == 0


def test_rows_without_a_vector_are_never_rescored_or_returned():
    rng = np.random.default_rng(5)
    store = CandidateStore()
    for i, v in enumerate(_clustered(rng, 3000)):
        store.add("a", "agent", f"f{i}", "x", v.tolist() if i % 2 else None)
    hits = LocalFactSearch(store, quantize_min=1000).semantic("a", ["agent"], "m", _clustered(rng, 1)[0].tolist(), 50, None)
    assert len(hits) == 50 and all(int(h.fact_id[1:]) % 2 for h in hits)


def test_a_segment_from_the_stores_packed_rows_equals_one_from_lists():
    rng = np.random.default_rng(9)
    vectors = _clustered(rng, 50)
    packed = unpack_embeddings([v.tobytes() for v in vectors])
    assert packed[3].matrix_row()[1] == 3
    from pipeline.store.port import FactCandidate
    from tests.pipeline.search.fakes import T0

    def segment(embeddings):
        return Segment.build([FactCandidate(f"f{i}", "agent", None, "x", e, T0) for i, e in enumerate(embeddings)], "m")

    assert np.array_equal(segment(packed).matrix, segment([v.tolist() for v in vectors]).matrix)


def test_the_segment_cache_stays_within_its_memory_bound_least_recently_used_first():
    rng = np.random.default_rng(1)
    store = CandidateStore()
    for agent in range(6):
        for i, v in enumerate(_clustered(rng, 2000)):
            store.add(f"a{agent}", "agent", f"f{agent}-{i}", f"fact {i}", v.tolist())
    one = Segment.build(store.facts.search_candidates("a0", ["agent"], "m"), "m").nbytes
    search = LocalFactSearch(store, cache_mb=2.5 * one / 2**20)
    query = _clustered(rng, 1)[0].tolist()
    for agent in range(6):
        search.semantic(f"a{agent}", ["agent"], "m", query, 5, None)
        assert search.held_bytes() <= 2.5 * one
    held = {key[0] for key in search._segments}
    assert held == {"a4", "a5"}
    loads = store.loads
    search.semantic("a5", ["agent"], "m", query, 5, None)
    assert store.loads == loads          # still cached
    search.semantic("a0", ["agent"], "m", query, 5, None)
    assert store.loads == loads + 1      # evicted, built again


def test_a_search_over_more_segments_than_the_cache_holds_keeps_them_all_and_does_not_rebuild(caplog):
    """The agent's segment and the user's together exceed the bound: building the second must
    not evict the first (the next search would rebuild it, then evict the second: a rebuild
    per search). They stay, over the bound, with one warning; other agents' segments go."""
    rng = np.random.default_rng(2)
    store = CandidateStore()
    for scope_key, n in (("agent", 3000), ("user:u1", 1500)):
        for i, v in enumerate(_clustered(rng, n)):
            store.add("a0", scope_key, f"{scope_key}-{i}", f"fact {i}", v.tolist())
    for i, v in enumerate(_clustered(rng, 500)):
        store.add("a1", "agent", f"other-{i}", f"fact {i}", v.tolist())
    one = Segment.build(store.facts.search_candidates("a0", ["agent"], "m"), "m").nbytes
    search = LocalFactSearch(store, cache_mb=0.8 * one / 2**20)
    query = _clustered(rng, 1)[0].tolist()
    search.semantic("a1", ["agent"], "m", query, 5, None)
    with caplog.at_level("WARNING", logger="memory.search"):
        search.semantic("a0", ["agent", "user:u1"], "m", query, 5, None)
    loads = store.loads
    for _ in range(3):
        assert len(search.semantic("a0", ["agent", "user:u1"], "m", query, 5, None)) == 5
    assert store.loads == loads  # nothing rebuilt
    assert {key[:2] for key in search._segments} == {("a0", "agent"), ("a0", "user:u1")}  # a1's went
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "MEMORY_SEARCH_CACHE_MB" in caplog.records[0].message


def test_concurrent_misses_build_a_segment_once():
    store = CandidateStore()
    for i in range(500):
        store.add("a", "agent", f"f{i}", f"fact {i}", [1.0, float(i), 0.0])
    gate = threading.Event()
    real = store.facts.search_candidates

    def slow(*args):
        gate.wait(5)
        return real(*args)

    store.facts.search_candidates = slow
    search = LocalFactSearch(store)
    threads = [threading.Thread(target=search.semantic, args=("a", ["agent"], "m", [1.0, 0, 0], 3, None))
               for _ in range(6)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert store.loads == 1


def test_quantized_search_runs_over_the_sqlite_store(tmp_path):
    from datetime import datetime, timezone

    from pipeline.text import text_hash
    from schemas.documents import Fact

    rng = np.random.default_rng(2)
    vectors = _clustered(rng, 1200)
    store = SQLiteStore(str(tmp_path / "m.db"))
    store.create_indexes()
    for i, v in enumerate(vectors):
        store.facts.insert_fact(Fact(
            fact_id=f"f{i}", agent_id="a", scope="agent", scope_key="agent", content=f"fact {i}",
            hash=text_hash(f"fact {i}"), embedding=v.tolist(), embedding_model="m",
            formed_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        ))
    query = vectors[17].tolist()
    hits = LocalFactSearch(store, quantize_min=1000).semantic("a", ["agent"], "m", query, 5, None)
    assert hits[0].fact_id == "f17" and hits[0].score == pytest.approx(1.0, abs=1e-6)
    store.close()
