"""Search and context filtered by category and metadata (design §13 "Categories and
metadata"), on SQLite, the Mongo emulation and the Atlas emulation: the filter applies inside
each branch of the search (a match is found however many better facts it does not match), is
checked against the agent (a misspelt filter is refused, never read as "no memory"), and
follows a fact re-filed, retired or stored before labels existed."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.errors import InvalidInput
from pipeline.search import atlas
from pipeline.search.atlas_indexes import ensure_search_indexes
from pipeline.search.local import LocalFactSearch
from pipeline.service import MemoryService
from pipeline.store.ports.facts import FactUpdate
from pipeline.text import text_hash
from schemas.documents import AgentSettings, Fact
from schemas.settings import Settings
from tests.pipeline.store.conftest import open_adapter
from testkit.documents import T0

EMB = HashingEmbedder(16)
CLOCK = FrozenClock(T0 + timedelta(hours=1))
#: more than a branch reads (``retrieval.MIN_BRANCH_LIMIT``): a filter applied after the
#: search would find none of the facts it matches among them
CROWD = 60


@pytest.fixture(params=["sqlite", "mongo", "atlas"])
def kind(request):
    return request.param


@pytest.fixture
def store(kind, tmp_path):
    opened = open_adapter("sqlite" if kind == "sqlite" else "mongo", tmp_path)
    opened.create_indexes()
    if kind == "atlas":
        facts = opened.col("facts")
        for spec in (atlas.vector_index_definition(EMB.dim), atlas.search_index_definition()):
            facts.create_search_index(SearchIndexModel(definition=spec["definition"], name=spec["name"],
                                                       type=spec["type"]))
    opened.ingest.put_agent_settings(AgentSettings(agent_id="a1", metadata_keys=["project", "tier"]))
    yield opened
    opened.close()


def _fact(fact_id: str, text: str, *, categories=(), metadata=None, user: str | None = None, minutes: int = 0) -> Fact:
    scope = "user" if user else "agent"
    return Fact(fact_id=fact_id, agent_id="a1", scope=scope, user_id=user, scope_key=f"user:{user}" if user else "agent",
                content=text, hash=text_hash(text), embedding=EMB.embed([text]).vectors[0], embedding_model=EMB.model,
                formed_at=T0 + timedelta(minutes=minutes), categories=list(categories), metadata=metadata or {})


def _seed(store, facts) -> None:
    for f in facts:
        assert store.facts.insert_fact(f)[0]
    store.leases.bump_scope_versions("a1", ["agent", "user:u1"])


def _service(store, kind) -> MemoryService:
    search = atlas.AtlasFactSearch.from_store(store) if kind == "atlas" else LocalFactSearch(store)
    return MemoryService("a1", settings=Settings(_env_file=None), store=store, search=search, embedder=EMB, clock=CLOCK)


def _found(service, query, **where) -> list[str]:
    return [hit["id"] for hit in service.search_facts(query, session_id="s1", user_id="u1", top_k=5, **where)]


def test_a_filter_finds_its_one_fact_behind_a_crowd_of_better_matches_on_every_store(store, kind):
    crowd = [_fact(f"c{i}", f"festival budget {i}", categories=["travel"], metadata={"project": "zeus"}, minutes=i)
             for i in range(CROWD)]
    apollo = _fact("apollo", "the festival budget came up again near the end of a long planning call with the venue",
                   categories=["finance"], metadata={"project": "apollo", "tier": 2})
    _seed(store, [*crowd, apollo])
    service = _service(store, kind)
    assert "apollo" not in _found(service, "festival budget")  # unfiltered, the crowd wins
    assert _found(service, "festival budget", categories=["finance"]) == ["apollo"]
    assert _found(service, "festival budget", metadata={"project": "apollo"}) == ["apollo"]
    assert _found(service, "festival budget", metadata={"project": ["apollo", "hera"], "tier": 2}) == ["apollo"]
    # every key must match, and a value's type is part of it
    assert _found(service, "festival budget", metadata={"project": "apollo", "tier": 3}) == []
    assert _found(service, "festival budget", metadata={"tier": "2"}) == []
    assert _found(service, "festival budget", categories=["finance"], metadata={"project": "zeus"}) == []
    # categories are any of: the crowd's category joins it
    both = _found(service, "festival budget", categories=["finance", "travel"])
    assert len(both) == 5 and set(both) <= {"apollo", *(f.fact_id for f in crowd)}


def test_the_hits_carry_their_categories_and_metadata(store, kind):
    _seed(store, [_fact("f1", "Alice books the Lisbon venue", categories=["travel"],
                        metadata={"project": ["apollo", "zeus"], "tier": 1})])
    [hit] = _service(store, kind).search_facts("Lisbon venue", session_id="s1", user_id="u1", categories=["travel"])
    assert (hit["categories"], hit["metadata"]) == (["travel"], {"project": ["apollo", "zeus"], "tier": 1})
    # a metadata key holding several values is found by any of them
    assert _found(_service(store, kind), "Lisbon venue", metadata={"project": "zeus"}) == ["f1"]


def test_a_refiled_fact_moves_in_and_out_of_the_filter_and_a_retired_one_leaves_it(store, kind):
    _seed(store, [_fact("f1", "Alice books the Lisbon venue", categories=["travel"]),
                  _fact("f2", "The venue deposit is paid", categories=["finance"])])
    service = _service(store, kind)
    assert _found(service, "venue", categories=["travel"]) == ["f1"]
    [f1] = store.facts.get_facts(["f1"])
    assert store.facts.update_fact("f1", FactUpdate(
        content=f1.content, hash=f1.hash, embedding=f1.embedding, embedding_model=f1.embedding_model, run_id="edit-1",
        now=CLOCK.now(), categories=["finance"]))
    store.leases.bump_scope_versions("a1", ["agent"])
    assert _found(service, "venue", categories=["travel"]) == []
    assert sorted(_found(service, "venue", categories=["finance"])) == ["f1", "f2"]
    assert store.facts.retire_fact("f2", CLOCK.now(), "r-retire")
    store.leases.bump_scope_versions("a1", ["agent"])
    assert _found(service, "venue", categories=["finance"]) == ["f1"]
    assert store.facts.labelled_fact_ids("a1", ["agent"], [["category:finance"]]) == {"f1"}


def test_a_filter_never_reaches_past_the_scopes_the_conversation_sees(store, kind):
    _seed(store, [_fact("mine", "the venue for Alice", categories=["travel"], user="u1"),
                  _fact("theirs", "the venue for Bob", categories=["travel"], user="u2")])
    service = _service(store, kind)
    assert _found(service, "venue", categories=["travel"]) == ["mine"]
    assert store.facts.labelled_fact_ids("a1", ["user:u1"], [["category:travel"]]) == {"mine"}


def test_a_filtered_context_shows_only_the_facts_it_matches_and_leaves_the_cache_alone(store, kind):
    _seed(store, [_fact("f1", "Alice books the Lisbon venue", categories=["travel"], metadata={"project": "apollo"}),
                  _fact("f2", "The venue deposit is paid", categories=["finance"], metadata={"project": "zeus"})])
    service = _service(store, kind)
    whole = service.get_memory_context(session_id="s1", user_id="u1")
    assert "Lisbon" in whole and "deposit" in whole
    narrowed = service.get_memory_context(session_id="s1", user_id="u1", metadata={"project": "zeus"})
    assert "deposit" in narrowed and "Lisbon" not in narrowed
    block = service.memory_context(session_id="s1", user_id="u1", categories=["travel"], query="venue")
    shown = [f.text for f in [*block.relevant_facts, *block.facts]]
    assert shown and all("Lisbon" in text for text in shown)
    # the session's cached context is still the whole one
    assert service.get_memory_context(session_id="s1", user_id="u1") == whole


@pytest.mark.parametrize(("where", "field", "says"), [
    ({"categories": ["finanse"]}, "categories[0]", "is not a category of agent 'a1'"),
    ({"categories": ["Finance!"]}, "categories[0]", "is not a category name"),
    ({"metadata": {"channel": "web"}}, "metadata.channel", "its filterable keys: project, tier"),
    ({"metadata": {"tier": 1.5}}, "metadata.tier", "is a fraction"),
    ({"metadata": {"project": ["apollo", None]}}, "metadata.project[1]", "is null"),
    ({"metadata": {"project": []}}, "metadata.project", "1 to 20 values"),
])
def test_a_misspelt_filter_is_refused_naming_it_on_search_and_context(store, kind, where, field, says):
    service = _service(store, kind)
    for call in (lambda: service.search_facts("venue", session_id="s1", user_id="u1", **where),
                 lambda: service.get_memory_context(session_id="s1", user_id="u1", **where)):
        with pytest.raises(InvalidInput) as refused:
            call()
        assert refused.value.field == field and says in str(refused.value)


def test_a_category_of_an_earlier_list_still_filters_the_facts_filed_under_it(store, kind):
    from usecases import categories

    _seed(store, [_fact("f1", "The venue deposit is paid", categories=["finance"])])
    categories.set_list(store.ingest, "a1", ["venues"], by="owner", now=CLOCK.now())
    assert _found(_service(store, kind), "deposit", categories=["finance"]) == ["f1"]


def test_a_sqlite_file_made_before_labels_gets_them_from_its_categories_when_opened(tmp_path):
    store = open_adapter("sqlite", tmp_path)
    store.create_indexes()
    _seed(store, [_fact("f1", "The venue deposit is paid", categories=["finance"])])
    store.close()
    with sqlite3.connect(tmp_path / "memory.db") as conn:  # the file as the version before wrote it
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%labels%'"):
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute("DROP TABLE memory2_fact_labels")
        conn.execute("ALTER TABLE memory2_facts DROP COLUMN labels")
    reopened = open_adapter("sqlite", tmp_path)
    reopened.create_indexes()
    assert reopened.facts.labelled_fact_ids("a1", ["agent"], [["category:finance"]]) == {"f1"}
    reopened.close()


def test_mongo_facts_stored_before_labels_get_them_when_indexes_are_created(tmp_path):
    store = open_adapter("mongo", tmp_path)
    store.create_indexes()
    _seed(store, [_fact("f1", "The venue deposit is paid", categories=["finance"])])
    store.col("facts").update_many({}, {"$unset": {"labels": ""}})
    assert store.facts.labelled_fact_ids("a1", ["agent"], [["category:finance"]]) == set()
    store.create_indexes()
    assert store.facts.labelled_fact_ids("a1", ["agent"], [["category:finance"]]) == {"f1"}


def test_sqlite_finds_labelled_facts_by_an_index_seek(tmp_path):
    from pipeline.store.sqlite.labels import labelled_query

    store = open_adapter("sqlite", tmp_path)
    store.create_indexes()
    query, args = labelled_query(store.facts.db.t, "a1", ["agent", "user:u1"], [["category:finance"], ["meta:tier=2"]])
    plan = " | ".join(row[3] for row in store.facts.db.conn().execute(f"EXPLAIN QUERY PLAN {query}", args))
    assert "SCAN" not in plan and "fact_labels USING" in plan, plan
    store.close()


def test_atlas_refuses_a_labels_filter_on_an_index_made_before_labels_were_a_filter_path(tmp_path):
    """What an operator meets who upgrades without ``memoryctl create-indexes``: the server's
    refusal, which the emulation gives as Atlas does (``testkit.atlas_rules``)."""
    store = open_adapter("mongo", tmp_path)
    store.create_indexes()
    facts = store.col("facts")
    old_vector = atlas.vector_index_definition(EMB.dim)
    old_vector["definition"]["fields"] = [f for f in old_vector["definition"]["fields"] if f["path"] != "labels"]
    old_text = atlas.search_index_definition()
    del old_text["definition"]["mappings"]["fields"]["labels"]
    for spec in (old_vector, old_text):
        facts.create_search_index(SearchIndexModel(definition=spec["definition"], name=spec["name"], type=spec["type"]))
    _seed(store, [_fact("f1", "The venue deposit is paid", categories=["finance"])])
    search = atlas.AtlasFactSearch.from_store(store)
    vector = EMB.embed(["venue"]).vectors[0]
    with pytest.raises(OperationFailure, match="'labels' needs to be indexed as filter"):
        search.semantic("a1", ["agent"], EMB.model, vector, 10, None, having=[["category:finance"]])
    with pytest.raises(OperationFailure, match="path 'labels' needs to be indexed as token"):
        search.text("a1", ["agent"], "venue", 10, None, having=[["category:finance"]])
    assert [h.fact_id for h in search.semantic("a1", ["agent"], EMB.model, vector, 10, None)] == ["f1"]
    # ``memoryctl create-indexes`` updates the definitions that changed, and the filter runs
    outcomes = ensure_search_indexes(facts, EMB.dim, wait_s=5, progress=lambda line: None)
    assert [o.action for o in outcomes] == ["updated", "updated"]
    assert [h.fact_id for h in search.semantic("a1", ["agent"], EMB.model, vector, 10, None,
                                               having=[["category:finance"]])] == ["f1"]
    assert [h.fact_id for h in search.text("a1", ["agent"], "venue", 10, None, having=[["category:finance"]])] == ["f1"]
