"""Search hits travel typed from retrieval to the facade, and the facade answers in the shape
the design documents: ISO 8601 strings that parse back to the very times stored."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.retrieval import search_facts
from schemas.hits import SearchHit
from pipeline.search.local import LocalFactSearch
from pipeline.search.query import FactQuery, SearchClients
from pipeline.service import MemoryService
from schemas.api import SearchResponse
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

EMB = HashingEmbedder(64)
LIVE_KEYS = ["id", "content", "scope", "formed_at", "updated_at", "age", "score"]
AS_OF_KEYS = ["id", "content", "scope", "formed_at", "updated_at", "valid_from", "valid_to", "age", "score"]
_ZONE = st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))])
_TIME = st.builds(lambda seconds, zone: (T0 + timedelta(seconds=seconds)).astimezone(zone),
                  st.integers(-10**8, 10**8), _ZONE)


@hsettings(max_examples=80, deadline=None)
@given(formed=_TIME, updated=_TIME, valid_from=st.none() | _TIME, valid_to=st.none() | _TIME,
       score=st.floats(0, 1), scope=st.sampled_from(["agent", "user"]))
def test_a_hit_is_written_out_in_the_documented_shape_and_reads_back_the_same(
    formed, updated, valid_from, valid_to, score, scope,
):
    hit = SearchHit(id="f1", content="Alice's email is a@b.c", scope=scope, formed_at=formed, updated_at=updated,
                  age="1h ago", score=score, valid_from=valid_from, valid_to=valid_to if valid_from else None)
    result = hit.as_result()
    assert list(result) == (LIVE_KEYS if valid_from is None else AS_OF_KEYS)
    assert datetime.fromisoformat(result["formed_at"]) == formed
    assert datetime.fromisoformat(result["updated_at"]) == updated
    if valid_from is not None:
        assert datetime.fromisoformat(result["valid_from"]) == valid_from
        assert result["valid_to"] == (valid_to.isoformat() if valid_to else None)
    assert hit.aged_from == (valid_from or updated)


def test_a_hit_refuses_what_is_not_a_hit():
    with pytest.raises(ValueError, match="scope"):
        SearchHit(id="f1", content="x", scope="session", formed_at=T0, updated_at=T0, age="0m ago", score=1.0)


@pytest.fixture
def searched(store):
    now = T0 + timedelta(days=2)
    content = "Alice's email is alice@example.com"
    store.facts.insert_fact(fact("f1", content, user="u1", embedding=EMB.embed([content]).vectors[0], model=EMB.model,
                           formed=now - timedelta(hours=3)))
    clock = FrozenClock(now)
    service = MemoryService("a1", settings=Settings(_env_file=None), store=store, search=LocalFactSearch(store),
                            embedder=EMB, clock=clock)
    return store, service, clock


def test_retrieval_hands_the_facade_the_stored_times_and_the_facade_writes_them_once(searched):
    store, service, clock = searched
    found = search_facts(SearchClients(store, service.search, EMB, service.settings, clock),
                         FactQuery("a1", "s1", "u1", "alice email", track_access=False))
    [stored] = store.facts.get_facts(["f1"])
    [hit] = found.hits
    assert (hit.id, hit.formed_at, hit.updated_at, hit.age) == ("f1", stored.formed_at, stored.changed_at, "3h ago")
    assert found.debug is None
    results = service.search_facts("alice email", session_id="s1", user_id="u1")
    assert results == [{**hit.as_result(), "score": results[0]["score"]}]
    assert list(results[0]) == LIVE_KEYS and results[0]["formed_at"] == stored.formed_at.isoformat()


def test_a_search_as_of_a_past_time_shows_the_validity_of_each_hit(searched):
    store, service, clock = searched
    [result] = service.search_facts("alice email", session_id="s1", user_id="u1", as_of=clock.now())
    [stored] = store.facts.get_facts(["f1"])
    assert list(result) == AS_OF_KEYS
    assert (result["valid_from"], result["valid_to"]) == (stored.valid_from.isoformat(), None)
    answer = service.search_facts("alice email", session_id="s1", user_id="u1", debug=True)
    assert set(answer) == {"results", "debug"} and list(answer["results"][0]) == LIVE_KEYS


@hsettings(max_examples=40, deadline=None)
@given(formed=_TIME, updated=_TIME, valid_from=st.none() | _TIME, expires=st.none() | _TIME)
def test_the_wire_answer_is_the_hit_itself_written_in_the_documented_shape(formed, updated, valid_from, expires):
    hit = SearchHit(id="f1", content="x", scope="user", formed_at=formed, updated_at=updated, age="1h ago",
                    score=0.5, valid_from=valid_from, expires_at=expires)
    [wire] = json.loads(SearchResponse(results=[hit]).model_dump_json())["results"]
    assert wire == {"valid_from": None, "valid_to": None, "expires_at": None, "categories": [], "metadata": {},
                    **hit.as_result()}
    assert datetime.fromisoformat(wire["formed_at"]) == formed and wire["formed_at"] == formed.isoformat()
