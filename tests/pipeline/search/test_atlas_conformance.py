"""The Atlas search adapter end to end against the strict emulation (``testkit``), and
the emulation refusing what Atlas refuses: a test of the adapter here fails the way the server
would fail, not only the way our own pipeline builders agree with themselves."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pymongo.errors import AutoReconnect, OperationFailure
from pymongo.operations import SearchIndexModel

from pipeline.clock import FrozenClock
from pipeline.errors import StoreUnavailable
from pipeline.search import atlas
from pipeline.search.local import LocalFactSearch
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings
from testkit.documents import fact
from testkit.mongo_emulation import OUTAGE, emulated_database

DIM = 3
FACTS = [
    ("f1", "Alice lives in Lisbon", [1.0, 0.0, 0.0]),
    ("f2", "The launch event is on March 14", [0.0, 1.0, 0.0]),
    ("f3", "Alice prefers short answers about the launch", [0.6, 0.8, 0.0]),
]


@pytest.fixture
def store():
    opened = MongoStore(emulated_database(clock=FrozenClock()))
    opened.create_indexes()
    facts = opened.col("facts")
    for spec in (atlas.vector_index_definition(DIM), atlas.search_index_definition()):
        facts.create_search_index(SearchIndexModel(definition=spec["definition"], name=spec["name"], type=spec["type"]))
    for fact_id, content, vector in FACTS:
        opened.facts.insert_fact(fact(fact_id, content, embedding=vector))
    return opened


def _run(store, pipeline):
    return list(store.col("facts").aggregate(pipeline))


def test_semantic_search_runs_on_the_vector_index_with_atlas_cosine_scores(store):
    hits = atlas.AtlasFactSearch.from_store(store).semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 10, None)
    assert [(h.fact_id, round(h.score, 6)) for h in hits] == [("f1", 1.0), ("f3", 0.8), ("f2", 0.5)]


def test_semantic_search_applies_the_threshold_model_and_scope_inside_the_pipeline(store):
    search = atlas.AtlasFactSearch.from_store(store)
    assert [h.fact_id for h in search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 10, 0.75)] == ["f1", "f3"]
    assert search.semantic("a1", ["agent"], "other-model", [1.0, 0.0, 0.0], 10, None) == []
    assert search.semantic("a1", ["user:u1"], "m1", [1.0, 0.0, 0.0], 10, None) == []
    assert search.semantic("a2", ["agent"], "m1", [1.0, 0.0, 0.0], 10, None) == []


def test_a_retired_fact_is_no_longer_found_by_either_branch(store):
    store.facts.retire_fact("f1", store.facts.get_facts(["f1"])[0].formed_at + timedelta(seconds=1), "run-x")
    search = atlas.AtlasFactSearch.from_store(store)
    assert "f1" not in [h.fact_id for h in search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 10, None)]
    assert "f1" not in [h.fact_id for h in search.text("a1", ["agent"], "Lisbon", 10, None)]


def test_text_search_is_fuzzy_and_scores_bm25_like_the_local_search(store):
    remote = atlas.AtlasFactSearch.from_store(store).text("a1", ["agent"], "Lisbn launch", 10, None)
    local = LocalFactSearch(store).text("a1", ["agent"], "Lisbn launch", 10, None)
    assert [h.fact_id for h in remote] == [h.fact_id for h in local]
    assert {h.fact_id for h in remote} == {"f1", "f2", "f3"}
    for r, l in zip(remote, local):
        assert r.score == pytest.approx(l.score, rel=1e-6)


SHORT_AND_NUMERIC = [
    ("s1", "The cot is blue", [1.0, 0.0, 0.0]),
    ("s2", "The cat sleeps on the sofa", [1.0, 0.0, 0.0]),
    ("s3", "The budget for 2024 is set", [1.0, 0.0, 0.0]),
    ("s4", "The budget for 2023 was smaller", [1.0, 0.0, 0.0]),
    ("s5", "Invoice ref42 is paid", [1.0, 0.0, 0.0]),
    ("s6", "Invoice ref43 is open", [1.0, 0.0, 0.0]),
]


@pytest.mark.parametrize("query", ["cat", "2023", "cat 2023 budgt", "ref42", "budgets budget cot", "the sofa"])
def test_typos_are_tolerated_for_the_same_terms_on_atlas_as_locally(query):
    store = MongoStore(emulated_database())
    facts = store.col("facts")
    facts.create_search_index(SearchIndexModel(**atlas.search_index_definition()))
    for fact_id, content, vector in SHORT_AND_NUMERIC:
        store.facts.insert_fact(fact(fact_id, content, embedding=vector))
    remote = atlas.AtlasFactSearch(facts).text("a1", ["agent"], query, 10, None)
    local = LocalFactSearch(store).text("a1", ["agent"], query, 10, None)
    assert [h.fact_id for h in remote] == [h.fact_id for h in local]
    assert [h.score for h in remote] == pytest.approx([h.score for h in local], rel=1e-6)


# ------------------------------------------------------------- one text threshold ----------
PLANS = ["budget", "venue", "catering", "guest", "stream", "press", "lighting", "travel", "stage", "menu"]


def _small_agent(n: int):
    """An index holding one agent's ``n`` facts (so Atlas's whole-index statistics are the
    agent's): one fact names Berlin; every fact speaks of the team and its plan."""
    store = MongoStore(emulated_database())
    facts = store.col("facts")
    facts.create_search_index(SearchIndexModel(**atlas.search_index_definition()))
    store.facts.insert_fact(fact("berlin", "The team lead lives in Berlin", embedding=[1.0, 0.0, 0.0]))
    for i in range(1, n):
        content = f"The team reviewed the {PLANS[i % len(PLANS)]} plan on day {i}"
        store.facts.insert_fact(fact(f"f{i:03d}", content, embedding=[1.0, 0.0, 0.0]))
    return store


@pytest.mark.parametrize("n", [5, 20, 100])
@pytest.mark.parametrize("query", ["Berlin", "team plan", "Where does the team lead live?", "budget venue"])
def test_atlas_and_the_local_search_keep_the_same_text_hits_at_the_production_threshold(n, query):
    store = _small_agent(n)
    threshold = Settings(_env_file=None).search_text_threshold
    remote = atlas.AtlasFactSearch.from_store(store).text("a1", ["agent"], query, 50, threshold)
    local = LocalFactSearch(store).text("a1", ["agent"], query, 50, threshold)
    assert [h.fact_id for h in remote] == [h.fact_id for h in local]
    assert [h.score for h in remote] == pytest.approx([h.score for h in local], rel=1e-6)
    if query == "Berlin":  # the rarest word of a small store finds its fact on both
        assert [h.fact_id for h in remote] == ["berlin"]
    if query == "team plan":  # words in every fact pass on neither
        assert remote == []


def test_atlas_counts_only_the_live_facts_the_text_branch_searches():
    store = _small_agent(5)
    store.facts.insert_fact(fact("other-agent", "The team met in Berlin", agent="a2", embedding=[1.0, 0.0, 0.0]))
    store.facts.insert_fact(fact("user-fact", "The team plan of u1", user="u1", embedding=[1.0, 0.0, 0.0]))
    store.facts.retire_fact("f001", store.facts.get_facts(["f001"])[0].formed_at + timedelta(seconds=1), "run-x")
    search = atlas.AtlasFactSearch.from_store(store)
    assert search.searched("a1", ["agent"]) == 4
    assert search.searched("a1", ["agent", "user:u1"]) == 5


# --------------------------------------------------------------------------- refusals -------
def _vector_stage(**changes):
    stage = atlas.vector_pipeline("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 5, None)
    stage[0]["$vectorSearch"].update(changes)
    return stage


@pytest.mark.parametrize(("condition", "code", "message"), [
    ({"retired_at": {"$eq": None}}, None, "needs to be indexed as filter"),
    ({"live": {"$eq": None}}, 7828301, "Operand type is not supported for $vectorSearch: null"),
    ({"live": None}, 7828301, "null"),
    ({"scope_key": {"$in": ["agent", None]}}, 7828302, "null"),
    ({"live": {"$eq": [True]}}, 7828301, "array"),
    ({"live": {"$exists": True}}, 7828300, "$exists"),
    ({"$nor": [{"live": False}]}, 7828300, "$nor"),
    ({"agent_id": {"$regex": "a"}}, 7828300, "$regex"),
    ({"content": {"$eq": "x"}}, None, "Path 'content' needs to be indexed as filter"),
])
def test_the_emulation_refuses_vector_filters_that_atlas_refuses(store, condition, code, message):
    with pytest.raises(OperationFailure, match="filter_validator|vector-search") as refused:
        _run(store, _vector_stage(filter=condition))
    assert message in str(refused.value)
    if code is not None:
        assert refused.value.code == code


def test_the_pre_fix_null_filter_is_refused_even_when_retired_at_is_declared():
    store = MongoStore(emulated_database())
    definition = atlas.vector_index_definition(DIM)
    definition["definition"]["fields"].append({"type": "filter", "path": "retired_at"})
    store.col("facts").create_search_index(SearchIndexModel(**definition))
    with pytest.raises(OperationFailure, match="not supported for \\$vectorSearch: null") as refused:
        _run(store, _vector_stage(filter={"$and": [{"agent_id": {"$eq": "a1"}}, {"retired_at": {"$eq": None}}]}))
    assert refused.value.code == 7828301


@pytest.mark.parametrize(("changes", "message"), [
    ({"queryVector": [1.0, 0.0]}, "indexed with 3 dimensions but queried with 2"),
    ({"numCandidates": 10_001}, "numCandidates must be <= 10000"),
    ({"numCandidates": 4, "limit": 5}, "must be >= limit"),
    ({"limit": 0}, "limit must be a positive int"),
    ({"index": "nope"}, "no vector search index named 'nope'"),
    ({"path": "content"}, "Path 'content' needs to be indexed as vector"),
    ({"k": 3}, "unknown field"),
])
def test_the_emulation_refuses_vector_stages_that_atlas_refuses(store, changes, message):
    with pytest.raises(OperationFailure) as refused:
        _run(store, _vector_stage(**changes))
    assert message in str(refused.value) and "[rule:" in str(refused.value)


@pytest.mark.parametrize("stage", ["$vectorSearch", "$search"])
def test_a_search_stage_must_come_first(store, stage):
    first = _vector_stage() if stage == "$vectorSearch" else atlas.text_pipeline("a1", ["agent"], "Lisbon", 5, None)
    with pytest.raises(OperationFailure, match="only valid as the first stage") as refused:
        _run(store, [{"$match": {"agent_id": "a1"}}, first[0]])
    assert refused.value.code == 40602


@pytest.mark.parametrize(("filter_clause", "message"), [
    ({"equals": {"path": "retired_at", "value": None}}, "null on path 'retired_at'"),
    ({"equals": {"path": "live", "value": "yes"}}, "needs to be indexed as token"),
    ({"in": {"path": "content", "value": ["x"]}}, "needs to be indexed as token"),
])
def test_the_emulation_refuses_search_filters_the_index_does_not_support(store, filter_clause, message):
    pipeline = atlas.text_pipeline("a1", ["agent"], "Lisbon", 5, None)
    pipeline[0]["$search"]["compound"]["filter"].append(filter_clause)
    with pytest.raises(OperationFailure, match="rule:") as refused:
        _run(store, pipeline)
    assert message in str(refused.value)


def test_the_emulation_refuses_a_fuzzy_edit_count_atlas_does_not_allow(store):
    pipeline = atlas.text_pipeline("a1", ["agent"], "Lisbon", 5, None)
    pipeline[0]["$search"]["compound"]["should"][0]["text"]["fuzzy"]["maxEdits"] = 3
    with pytest.raises(OperationFailure, match="maxEdits must be 1 or 2"):
        _run(store, pipeline)


def test_the_wrong_score_meta_is_refused(store):
    pipeline = _vector_stage()
    pipeline[1]["$project"]["score"] = {"$meta": "searchScore"}
    with pytest.raises(OperationFailure, match="searchScore"):
        _run(store, pipeline)


def test_a_new_index_is_not_queryable_until_built_and_an_update_keeps_serving_the_old_one():
    clock = FrozenClock()
    store = MongoStore(emulated_database(clock=clock, build_s=30))
    store.facts.insert_fact(fact("f1", "Alice lives in Lisbon", embedding=[1.0, 0.0, 0.0]))
    facts = store.col("facts")
    spec = atlas.vector_index_definition(DIM)
    facts.create_search_index(SearchIndexModel(**spec))
    [listed] = facts.list_search_indexes()
    assert (listed["status"], listed["queryable"]) == ("BUILDING", False)
    search = atlas.AtlasFactSearch(facts)
    assert search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 5, None) == []
    clock.advance(seconds=30)
    assert [h.fact_id for h in search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 5, None)] == ["f1"]
    facts.update_search_index(atlas.VECTOR_INDEX, atlas.vector_index_definition(2)["definition"])
    [listed] = facts.list_search_indexes()
    assert (listed["status"], listed["queryable"]) == ("BUILDING", True)
    assert listed["latestDefinition"]["fields"][0]["numDimensions"] == 2
    assert [h.fact_id for h in search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 5, None)] == ["f1"]
    assert facts.search_catalog.rebuilds == 1


def test_with_index_lag_a_write_is_searchable_only_after_the_lag():
    clock = FrozenClock()
    store = MongoStore(emulated_database(clock=clock, index_lag_s=5))
    facts = store.col("facts")
    facts.create_search_index(SearchIndexModel(**atlas.vector_index_definition(DIM)))
    store.facts.insert_fact(fact("f1", "Alice lives in Lisbon", embedding=[1.0, 0.0, 0.0]))
    search = atlas.AtlasFactSearch(facts)
    assert search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 5, None) == []
    clock.advance(seconds=5)
    assert [h.fact_id for h in search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 5, None)] == ["f1"]
    assert store.facts.get_facts(["f1"])[0].content == "Alice lives in Lisbon"  # plain reads never lag


@pytest.mark.parametrize(("similarity", "expected"), [
    # vector-search-stage docs, "Atlas Vector Search Score"
    ("cosine", [("near", 1.0), ("far", 0.5)]),            # (1 + cos) / 2 of unit-free vectors
    ("dotProduct", [("near", 2.5), ("far", 0.5)]),       # (1 + dot) / 2
    ("euclidean", [("near", 1.0), ("far", 1 / (1 + 5 ** 0.5))]),   # 1 / (1 + distance)
])
def test_the_emulation_scores_with_the_similarity_the_index_declares(similarity, expected):
    facts = emulated_database()["facts"]
    spec = {"fields": [{"type": "vector", "path": "v", "numDimensions": 2, "similarity": similarity}]}
    facts.create_search_index(SearchIndexModel(name="v", type="vectorSearch", definition=spec))
    facts.insert_many([{"_id": "near", "v": [2.0, 0.0]}, {"_id": "far", "v": [0.0, 1.0]}])
    found = _run_on(facts, [
        {"$vectorSearch": {"index": "v", "path": "v", "queryVector": [2.0, 0.0], "numCandidates": 10, "limit": 2}},
        {"$project": {"score": {"$meta": "vectorSearchScore"}}},
    ])
    assert [(d["_id"], round(d["score"], 6)) for d in found] == [(i, round(s, 6)) for i, s in expected]


def _run_on(collection, pipeline):
    return list(collection.aggregate(pipeline))


@pytest.mark.parametrize(("field", "message"), [
    ({"type": "vector", "path": "v", "numDimensions": 8193, "similarity": "cosine"}, "numDimensions"),
    ({"type": "vector", "path": "v", "numDimensions": 2, "similarity": "manhattan"}, "similarity"),
    ({"type": "knnVector", "path": "v"}, "neither 'vector' nor 'filter'"),
])
def test_the_emulation_refuses_vector_index_definitions_atlas_refuses(field, message):
    facts = emulated_database()["facts"]
    with pytest.raises(OperationFailure, match=message):
        facts.create_search_index(SearchIndexModel(name="v", type="vectorSearch", definition={"fields": [field]}))


def test_a_search_during_a_failover_is_store_unavailable_and_finds_again_after(store):
    search = atlas.AtlasFactSearch.from_store(store)
    with OUTAGE.during():
        for branch in (lambda: search.semantic("a1", ["agent"], "m1", [1.0, 0.0, 0.0], 10, None),
                       lambda: search.text("a1", ["agent"], "Lisbon", 10, None)):
            with pytest.raises(StoreUnavailable) as caught:
                branch()
            assert isinstance(caught.value.__cause__, (AutoReconnect, OperationFailure))
    assert [h.fact_id for h in search.text("a1", ["agent"], "Lisbon", 10, None)] == ["f1"]


def test_a_bad_query_is_not_taken_for_an_outage(store):
    search = atlas.AtlasFactSearch(store.col("facts"))
    with pytest.raises(OperationFailure) as caught:
        search._run([{"$match": {}}, {"$vectorSearch": {}}])  # a search stage must come first
    assert not isinstance(caught.value, StoreUnavailable)
