"""The fused cut is stated in ranks: a fact found by one signal alone passes down to rank 6
(the design's 0.015 at k = 60) whatever RRF k is shipped, and only returned facts count as
accessed (design §6, §11)."""

import dataclasses
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from pipeline.clock import FrozenClock
from pipeline.embeddings.local import MODEL_NAME as LOCAL_MODEL
from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.errors import InvalidInput
from pipeline.retrieval import Thresholds, rank_query, search_facts
from pipeline.search.local import LocalFactSearch
from pipeline.search.query import FactQuery, SearchClients
from pipeline.search.port import FactSearch, Hit
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)


class Lists(FactSearch):
    """A search that answers fixed best-first lists: what the fusion receives from each branch."""

    def __init__(self, semantic: Sequence[str], text: Sequence[str] = ()) -> None:
        self._semantic = [Hit(fid, 0.9 - i * 1e-3) for i, fid in enumerate(semantic)]
        self._text = [Hit(fid, 9.0 - i * 1e-3) for i, fid in enumerate(text)]

    def semantic(self, agent_id, scope_keys, embedding_model, vector, limit, min_score, *, having=()):
        return self._semantic[:limit]

    def text(self, agent_id, scope_keys, query, limit, min_score, *, having=()):
        return self._text[:limit]


def _ranked(limits: Thresholds, semantic: Sequence[str], text: Sequence[str] = (), top_k: int = 50) -> list[str]:
    fused, _ = rank_query(Lists(semantic, text), "a1", ["agent"], "m", "q", [1.0], top_k, limits)
    return [f.fact_id for f in fused]


@pytest.mark.parametrize("k", [0, 1, 10, 60, 200])
def test_one_signal_alone_passes_down_to_rank_six_whatever_k(k):
    limits = Thresholds.from_settings(Settings(_env_file=None, search_rrf_k=k), "any-model")
    assert _ranked(limits, [f"f{i}" for i in range(1, 31)]) == [f"f{i}" for i in range(1, 7)]


def test_the_shipped_k_of_the_local_model_cuts_at_rank_six_too():
    limits = Thresholds.from_settings(Settings(_env_file=None), LOCAL_MODEL)
    assert limits.rrf_k == 10
    assert _ranked(limits, [], [f"t{i}" for i in range(1, 31)]) == [f"t{i}" for i in range(1, 7)]


@hsettings(max_examples=60, deadline=None)
@given(k=st.integers(0, 500), depth=st.integers(1, 40), rank=st.integers(1, 40))
def test_the_cut_depth_is_the_setting_for_every_k(k, depth, rank):
    limits = Thresholds.from_settings(Settings(_env_file=None, search_rrf_k=k, search_rrf_rank=depth), "m")
    ids = [f"f{i}" for i in range(1, 41)]
    assert (f"f{rank}" in _ranked(limits, ids)) == (rank <= depth)


def test_a_fact_both_signals_find_passes_where_one_signal_alone_would_not():
    limits = Thresholds.from_settings(Settings(_env_file=None), LOCAL_MODEL)
    semantic = [f"s{i}" for i in range(1, 8)] + ["both"]
    text = [f"t{i}" for i in range(1, 8)] + ["both"]
    kept = _ranked(limits, semantic, text)
    assert "both" in kept and "s8" not in kept and "s7" not in kept and "s6" in kept


@pytest.mark.parametrize("k", [1, 10, 60])
def test_a_fact_both_signals_find_passes_down_to_rank_72_of_each_whatever_k(k):
    limits = Thresholds.from_settings(Settings(_env_file=None, search_rrf_k=k), "m")
    semantic = [f"s{i}" for i in range(1, 100)]
    text = [f"t{i}" for i in range(1, 100)]
    semantic[71], text[71] = "both72", "both72"
    semantic[72], text[72] = "both73", "both73"
    kept = _ranked(limits, semantic, text, top_k=50)
    assert "both72" in kept and "both73" not in kept


def test_the_raw_threshold_of_older_deployments_keeps_its_old_meaning(monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH_RRF_THRESHOLD", "0.015")
    limits, origin = Thresholds.resolve(Settings(_env_file=None), LOCAL_MODEL)
    assert origin["rrf"] == "MEMORY_SEARCH_RRF_THRESHOLD"
    # 1 / (10 + 56) >= 0.015 > 1 / (10 + 57): as before, whatever it means at this k
    assert _ranked(limits, [f"f{i}" for i in range(1, 61)], top_k=50) == [f"f{i}" for i in range(1, 51)]
    assert len(_ranked(dataclasses.replace(limits, rrf_k=60), [f"f{i}" for i in range(1, 61)])) == 6


def test_setting_both_cuts_is_refused_naming_both(monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH_RRF_THRESHOLD", "0.02")
    monkeypatch.setenv("MEMORY_SEARCH_RRF_RANK", "4")
    with pytest.raises(ValueError, match="MEMORY_SEARCH_RRF_RANK or MEMORY_SEARCH_RRF_THRESHOLD, not both"):
        Settings(_env_file=None)


def test_a_rank_for_one_model_replaces_a_global_raw_threshold(monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH_RRF_THRESHOLD", "0.001")
    monkeypatch.setenv("MEMORY_SEARCH_BY_MODEL", '{"m": {"rrf_rank": 3}}')
    limits, origin = Thresholds.resolve(Settings(_env_file=None), "m")
    assert limits.rrf is None and limits.rrf_rank == 3
    assert _ranked(limits, ["a", "b", "c", "d"]) == ["a", "b", "c"]
    assert origin["rrf_rank"] == "MEMORY_SEARCH_BY_MODEL[m]"


def test_one_model_given_both_cuts_is_refused():
    settings = Settings(_env_file=None, search_by_model={"m": {"rrf": 0.02, "rrf_rank": 4}})
    with pytest.raises(InvalidInput, match="not both"):
        Thresholds.from_settings(settings, "m")


# ------------------------------------------------------------------ end to end --------------
class Planted(Embedder):
    """Vectors chosen per text (the local model's name, so its shipped k = 10 applies)."""

    provider = "local"
    model = LOCAL_MODEL
    dim = 8

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts):
        return Embeddings([self.vectors[t] for t in texts], self.model, self.dim)


def _near(cosine: float) -> list[float]:
    return [cosine, math.sqrt(1 - cosine * cosine), 0, 0, 0, 0, 0, 0]


def test_a_search_with_the_shipped_defaults_returns_and_counts_only_the_facts_above_the_cut(store):
    # twelve facts all above the semantic threshold, none sharing a word with the query: the
    # semantic branch alone finds each, at ranks 1 to 12
    contents = [f"Planted note number {i} on shelf {i}" for i in range(12)]
    vectors = {c: _near(0.9 - 0.04 * i) for i, c in enumerate(contents)}
    vectors["where are the lanterns"] = _near(1.0)
    embedder = Planted(vectors)
    for i, content in enumerate(contents):
        store.facts.insert_fact(fact(f"f{i:02d}", content, agent="a1", embedding=vectors[content], model=LOCAL_MODEL))
    store.leases.bump_scope_versions("a1", ["agent"])
    clock = FrozenClock(T0)

    results = search_facts(
        SearchClients(store, LocalFactSearch(store), embedder, Settings(_env_file=None), clock),
        FactQuery("a1", "s1", None, "where are the lanterns", top_k=10),
    )

    assert [hit.id for hit in results.hits] == [f"f{i:02d}" for i in range(6)]
    counts = {f.fact_id: f.access_count for f in store.facts.get_facts([f"f{i:02d}" for i in range(12)])}
    assert counts == {f"f{i:02d}": int(i < 6) for i in range(12)}
