import math

import numpy as np
import pytest

from pipeline.search import scoring
from pipeline.search.local import LocalFactSearch
from tests.pipeline.search.fakes import CandidateStore


def _unit(*values):
    v = np.asarray(values, dtype=float)
    return (v / np.linalg.norm(v)).tolist()


@pytest.fixture
def store():
    s = CandidateStore()
    s.add("a", "agent", "f1", "Mars Festival budget is $50,000", _unit(1, 0, 0), minutes=1)
    s.add("a", "agent", "f2", "The festival opens on 3 May", _unit(0.8, 0.6, 0), minutes=2)
    s.add("a", "user:u1", "f3", "Alice's email is alice@example.com", _unit(0, 1, 0), minutes=3)
    s.add("a", "user:u2", "f4", "Bob's festival ticket is VIP", _unit(1, 0, 0), minutes=4)
    s.add("b", "agent", "f5", "Mars Festival budget is secret", _unit(1, 0, 0), minutes=5)
    return s


def test_semantic_scores_are_half_of_one_plus_cosine_best_first(store):
    hits = LocalFactSearch(store).semantic("a", ["agent", "user:u1"], "m", _unit(1, 0, 0), 10, None)
    assert [h.fact_id for h in hits] == ["f1", "f2", "f3"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.9, 0.5])


def test_semantic_threshold_and_limit_apply(store):
    search = LocalFactSearch(store)
    assert [h.fact_id for h in search.semantic("a", ["agent", "user:u1"], "m", _unit(1, 0, 0), 10, 0.65)] == ["f1", "f2"]
    assert [h.fact_id for h in search.semantic("a", ["agent", "user:u1"], "m", _unit(1, 0, 0), 1, None)] == ["f1"]


def test_search_never_leaves_the_agent_and_scope_keys_it_is_given(store):
    search = LocalFactSearch(store)
    sem = {h.fact_id for h in search.semantic("a", ["agent", "user:u1"], "m", _unit(1, 0, 0), 10, None)}
    txt = {h.fact_id for h in search.text("a", ["agent", "user:u1"], "festival budget Bob VIP secret", 10, None)}
    assert sem | txt <= {"f1", "f2", "f3"}
    assert {h.fact_id for h in search.text("a", ["user:u2"], "festival", 10, None)} == {"f4"}


def test_facts_of_another_embedding_model_are_never_compared(store):
    store.add("a", "agent", "old", "Mars Festival budget", _unit(1, 0, 0), model="old-model")
    hits = LocalFactSearch(store).semantic("a", ["agent"], "m", _unit(1, 0, 0), 10, None)
    assert "old" not in {h.fact_id for h in hits}
    # ... but text search still finds it: text does not depend on the model
    assert "old" in {h.fact_id for h in LocalFactSearch(store).text("a", ["agent"], "budget", 10, None)}


def test_text_score_is_bm25_over_the_prefiltered_candidates(store):
    hits = LocalFactSearch(store).text("a", ["agent", "user:u1"], "budget", 10, None)
    assert [h.fact_id for h in hits] == ["f1"]
    lengths = [len(scoring.tokenize(t)) for t in (
        "Mars Festival budget is $50,000", "The festival opens on 3 May", "Alice's email is alice@example.com")]
    avg = sum(lengths) / 3
    expected = scoring.bm25_idf(3, 1) * 1 / (1 + 1.2 * (1 - 0.75 + 0.75 * lengths[0] / avg))
    assert hits[0].score == pytest.approx(expected, rel=1e-5)


def test_text_search_tolerates_one_typo_per_term(store):
    exact = LocalFactSearch(store).text("a", ["agent"], "festival budget", 10, None)
    typos = LocalFactSearch(store).text("a", ["agent"], "festivl budgte", 10, None)
    assert [h.fact_id for h in typos] == [h.fact_id for h in exact] == ["f1", "f2"]
    assert all(t.score < e.score for t, e in zip(typos, exact))


def test_text_threshold_drops_weak_matches(store):
    hits = LocalFactSearch(store).text("a", ["agent", "user:u1"], "festival", 10, 1.5)
    assert hits == []  # a term in 2 of 3 facts has a low idf


def test_cached_segments_are_rebuilt_when_the_scope_stamp_moves(store):
    search = LocalFactSearch(store)
    assert search.text("a", ["agent"], "tickets", 10, None) == []
    loads = store.loads
    store.add("a", "agent", "f9", "Tickets go on sale Friday", _unit(0, 0, 1))
    assert search.text("a", ["agent"], "tickets", 10, None) == []     # stamp unchanged: cached
    assert store.loads == loads
    store.bump("a", "agent")
    assert [h.fact_id for h in search.text("a", ["agent"], "tickets", 10, None)] == ["f9"]
    assert [h.fact_id for h in search.semantic("a", ["agent"], "m", _unit(0, 0, 1), 1, None)] == ["f9"]


def test_without_cache_every_search_reads_the_store(store):
    search = LocalFactSearch(store, cache=False)
    search.text("a", ["agent"], "budget", 10, None)
    search.text("a", ["agent"], "budget", 10, None)
    assert store.loads == 2


@pytest.mark.parametrize("query", ["", "   ", "!!"])
def test_empty_text_query_finds_nothing(store, query):
    assert LocalFactSearch(store).text("a", ["agent"], query, 10, None) == []


def test_no_scope_keys_means_no_results(store):
    search = LocalFactSearch(store)
    assert search.text("a", [], "budget", 10, None) == []
    assert search.semantic("a", [], "m", _unit(1, 0, 0), 10, None) == []


def test_equal_scores_break_ties_newest_first(store):
    store.add("a", "agent", "g1", "same words here", _unit(0, 0, 1), minutes=10)
    store.add("a", "agent", "g2", "same words here", _unit(0, 0, 1), minutes=20)
    hits = LocalFactSearch(store).semantic("a", ["agent"], "m", _unit(0, 0, 1), 2, None)
    assert [h.fact_id for h in hits] == ["g2", "g1"]
    assert math.isclose(hits[0].score, hits[1].score)


def test_a_big_stale_segment_serves_while_it_is_rebuilt_in_the_background(store):
    search = LocalFactSearch(store, background_min=1)
    assert [h.fact_id for h in search.text("a", ["agent"], "budget", 10, None)] == ["f1"]
    store.add("a", "agent", "f9", "New budget line", _unit(0, 0, 1))
    store.bump("a", "agent")
    first = [h.fact_id for h in search.text("a", ["agent"], "budget", 10, None)]
    assert "f1" in first  # answered at once, from the stale segment or the new one
    assert search.wait_for_refreshes(10)
    assert {h.fact_id for h in search.text("a", ["agent"], "budget", 10, None)} == {"f1", "f9"}
    assert {h.fact_id for h in search.semantic("a", ["agent"], "m", _unit(0, 0, 1), 1, None)} == {"f9"}
