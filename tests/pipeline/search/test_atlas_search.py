import pytest

from pipeline.search import atlas, scoring


def _mql_paths(node, out):
    """Field paths of an MQL filter: every key that is not an operator."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not key.startswith("$"):
                out.add(key)
            _mql_paths(value, out)
    elif isinstance(node, list):
        for item in node:
            _mql_paths(item, out)
    return out


def _search_paths(node, out):
    """Field paths of Atlas Search operators: every ``path`` value."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "path":
                out.add(value)
            _search_paths(value, out)
    elif isinstance(node, list):
        for item in node:
            _search_paths(item, out)
    return out


def _declared_vector_filters(dim=384):
    fields = atlas.vector_index_definition(dim)["definition"]["fields"]
    return {f["path"] for f in fields if f["type"] == "filter"}


def test_vector_index_is_cosine_with_the_embedder_dimension_and_every_filter_path():
    fields = atlas.vector_index_definition(1536)["definition"]["fields"]
    vector = [f for f in fields if f["type"] == "vector"]
    assert vector == [{"type": "vector", "path": "embedding", "numDimensions": 1536, "similarity": "cosine"}]
    assert {"agent_id", "user_id", "scope", "scope_key", "embedding_model", "live"} <= _declared_vector_filters()


@pytest.mark.parametrize("dim", [0, -3, "384", None])
def test_vector_index_refuses_a_bad_dimension(dim):
    with pytest.raises(ValueError, match="numDimensions"):
        atlas.vector_index_definition(dim)


def test_every_path_the_vector_pipeline_filters_on_is_declared_as_a_filter():
    stage = atlas.vector_pipeline("a1", ["agent", "user:u1"], "m", [0.1, 0.2], 10, 0.65)[0]["$vectorSearch"]
    used = _mql_paths(stage["filter"], set())
    assert used == {"agent_id", "scope_key", "embedding_model", "live"}
    assert used <= _declared_vector_filters()
    assert stage["index"] == atlas.VECTOR_INDEX and stage["path"] == "embedding"
    assert stage["numCandidates"] >= stage["limit"] == 10


def test_every_path_the_search_pipeline_filters_on_is_indexed_for_filtering():
    stage = atlas.text_pipeline("a1", ["agent"], "festivl budget", 10, 1.5)[0]["$search"]
    fields = atlas.search_index_definition()["definition"]["mappings"]["fields"]
    used = _search_paths(stage["compound"]["filter"], set())
    assert used == {"agent_id", "scope_key", "live"}
    assert fields["live"] == {"type": "boolean"}  # `equals` on a boolean needs a boolean mapping
    for path in used - {"live"}:
        assert fields[path]["type"] == "token"  # `equals`/`in` on strings need a token mapping
    assert {c["text"]["path"] for c in stage["compound"]["should"]} == {"search_text"}
    assert fields["search_text"]["analyzer"] == atlas.ANALYZER


def _null_operands(node):
    """Every null an MQL filter compares with."""
    if isinstance(node, dict):
        return [v for v in node.values() if v is None] + [n for v in node.values() for n in _null_operands(v)]
    if isinstance(node, list):
        return [n for item in node for n in _null_operands(item)]
    return []


def test_no_filter_compares_with_null_which_vector_search_refuses():
    vec = atlas.vector_pipeline("a1", ["agent"], "m", [1.0], 5, None)[0]["$vectorSearch"]["filter"]
    txt = atlas.text_pipeline("a1", ["agent"], "q", 5, None)[0]["$search"]["compound"]["filter"]
    assert _null_operands(vec) == [] and _null_operands(txt) == []


def test_filters_carry_the_agent_and_exactly_the_visible_scope_keys():
    vec = atlas.vector_pipeline("a1", ["agent", "user:u1"], "m", [1.0], 5, None)[0]["$vectorSearch"]["filter"]["$and"]
    assert {"agent_id": {"$eq": "a1"}} in vec and {"scope_key": {"$in": ["agent", "user:u1"]}} in vec
    assert {"live": {"$eq": True}} in vec and {"embedding_model": {"$eq": "m"}} in vec
    txt = atlas.text_pipeline("a1", ["agent"], "q", 5, None)[0]["$search"]["compound"]["filter"]
    assert {"equals": {"path": "agent_id", "value": "a1"}} in txt
    assert {"in": {"path": "scope_key", "value": ["agent"]}} in txt
    assert {"equals": {"path": "live", "value": True}} in txt


@pytest.mark.parametrize(
    ("builder", "meta"),
    [
        (lambda m: atlas.vector_pipeline("a", ["agent"], "m", [1.0], 5, m), "vectorSearchScore"),
        (lambda m: atlas.text_pipeline("a", ["agent"], "q", 5, m), "searchScore"),
    ],
)
def test_pipelines_project_atlas_scores_and_apply_the_threshold(builder, meta):
    with_threshold = builder(0.7)
    assert with_threshold[-2]["$project"]["score"] == {"$meta": meta}
    assert with_threshold[-1] == {"$match": {"score": {"$gte": 0.7}}}
    assert "$match" not in builder(None)[-1]


def test_text_search_is_fuzzy_like_the_local_search_only_for_long_non_numeric_terms():
    compound = atlas.text_pipeline("a", ["agent"], "The cat's 2023 budgets, budget ref42 Lisbn", 5, None)[0]["$search"]["compound"]
    fuzzy, exact = compound["should"]
    assert compound["minimumShouldMatch"] == 1 and "must" not in compound
    assert fuzzy["text"]["query"] == "budgets ref42 Lisbn"   # one word per distinct term
    assert fuzzy["text"]["fuzzy"] == {"maxEdits": scoring.FUZZY_MAX_EDITS,
                                      "prefixLength": scoring.FUZZY_PREFIX_LENGTH, "maxExpansions": 50}
    assert exact["text"] == {"query": "cat 2023", "path": "search_text"}   # no fuzzy key: exact terms


def test_a_query_of_stopwords_only_is_not_sent():
    facts = _Facts()
    assert atlas.AtlasFactSearch(facts).text("a", ["agent"], "what is the", 5, None) == []
    assert facts.calls == []
    with pytest.raises(ValueError, match="no searchable term"):
        atlas.text_pipeline("a", ["agent"], "what is the", 5, None)


def test_search_analyzer_drops_the_local_stopwords_and_stems_english():
    filters = atlas.SEARCH_ANALYZER["tokenFilters"]
    stop = next(f for f in filters if f["type"] == "stopword")
    assert set(stop["tokens"]) == set(scoring.STOPWORDS)
    assert {"type": "snowballStemming", "stemmerName": "english"} in filters


class _Facts:
    """Records aggregate calls and answers with canned documents."""

    name = "memory2_facts"

    def __init__(self, docs=()):
        self.docs = list(docs)
        self.calls = []

    def aggregate(self, pipeline, **kwargs):
        self.calls.append((pipeline, kwargs))
        return iter(self.docs)


def test_atlas_search_returns_hits_from_the_projected_scores_with_a_timeout():
    facts = _Facts([{"fact_id": "f1", "score": 0.91}, {"fact_id": "f2", "score": 0.7}])
    hits = atlas.AtlasFactSearch(facts).semantic("a", ["agent"], "m", [1.0, 0.0], 10, 0.65)
    assert [(h.fact_id, h.score) for h in hits] == [("f1", 0.91), ("f2", 0.7)]
    assert facts.calls[0][1]["maxTimeMS"] > 0


def test_atlas_search_without_scope_keys_or_query_sends_nothing():
    facts = _Facts()
    search = atlas.AtlasFactSearch(facts)
    assert search.semantic("a", [], "m", [1.0], 10, None) == []
    assert search.text("a", ["agent"], "  ", 10, None) == []
    assert facts.calls == []
