"""Search and context over HTTP narrowed by category and metadata (design §13 "Categories and
metadata"): the filter reaches the search, a misspelt one is a 422 naming the field as the
client sent it, and no filter ever shows a caller more than it sees without one."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.api.harness import EMB
from testkit.documents import fact

SEARCH = "/v1/agents/A/sessions/s1/search"
CONTEXT = "/v1/agents/A/sessions/s1/context"


def _put(store, now, fid, text, *, user=None, categories=(), metadata=None):
    f = fact(fid, text, agent="A", user=user, embedding=EMB.embed([text]).vectors[0], model=EMB.model,
             formed=now - timedelta(minutes=30))
    store.facts.insert_fact(f.model_copy(update={"categories": list(categories), "metadata": metadata or {}}))
    store.leases.bump_scope_versions("A", [f.scope_key])


@pytest.fixture
def filed(api):
    """Venue facts of agent A: u1's and u2's filed alike (travel, project apollo), one of the
    agent's under finance, and ``project`` and ``tier`` marked filterable."""
    store, now = api.deps.store, api.deps.clock.now()
    agent = store.ingest.get_agent_settings("A")
    store.ingest.put_agent_settings(agent.model_copy(update={"metadata_keys": ["project", "tier"]}))
    _put(store, now, "v-u1", "u1 books the Lisbon venue for the launch", user="u1", categories=["travel"],
         metadata={"project": "apollo", "tier": 2})
    _put(store, now, "v-u2", "u2 books the Porto venue for the launch", user="u2", categories=["travel"],
         metadata={"project": "apollo", "tier": 2})
    _put(store, now, "v-agent", "The venue deposit for the launch is paid", categories=["finance"],
         metadata={"project": "zeus"})
    return api


def _ids(answer) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [hit["id"] for hit in answer.json()["results"]]


def _agent(api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.keys['agent_a']}"}


def test_a_search_is_narrowed_to_the_categories_and_metadata_asked_for(filed, client):
    headers, ask = _agent(filed), {"query": "venue launch", "user_id": "u1"}
    assert {"v-u1", "v-agent"} <= set(_ids(client.post(SEARCH, json=ask, headers=headers)))
    assert _ids(client.post(SEARCH, json={**ask, "categories": ["travel"]}, headers=headers)) == ["v-u1"]
    assert _ids(client.post(SEARCH, json={**ask, "metadata": {"project": "zeus"}}, headers=headers)) == ["v-agent"]
    assert _ids(client.post(SEARCH, json={**ask, "metadata": {"project": ["zeus", "apollo"], "tier": 2}},
                            headers=headers)) == ["v-u1"]
    assert _ids(client.post(SEARCH, json={**ask, "categories": ["finance"], "metadata": {"tier": 2}},
                            headers=headers)) == []
    [hit] = client.post(SEARCH, json={**ask, "categories": ["travel"]}, headers=headers).json()["results"]
    assert (hit["categories"], hit["metadata"]) == (["travel"], {"project": "apollo", "tier": 2})


@pytest.mark.parametrize(("extra", "where", "why"), [
    ({"categories": ["travle"]}, "body categories[0]", "'travle' is not a category of agent 'A'"),
    ({"categories": ["travel", "Travel"]}, "body categories[1]", "is not a category name"),
    ({"categories": [3]}, "body categories[0]", "valid string"),
    ({"categories": "travel"}, "body categories", "valid list"),
    ({"metadata": {"colour": "red"}}, "body metadata.colour", "not a filterable metadata key of agent 'A'"),
    ({"metadata": {"tier": 2.5}}, "body metadata.tier", "is a fraction"),
    ({"metadata": {"tier": [1, {"x": 1}]}}, "body metadata.tier[1]", "is an object"),
    ({"metadata": ["project"]}, "body metadata", "valid dictionary"),
])
def test_a_bad_search_filter_is_a_422_naming_the_body_field(filed, client, extra, where, why):
    answer = client.post(SEARCH, json={"query": "venue", "user_id": "u1", **extra}, headers=_agent(filed))
    assert answer.status_code == 422, answer.text
    assert answer.json()["where"] == where and why in answer.json()["why"], answer.json()


def test_the_context_is_narrowed_by_repeated_category_and_a_json_metadata_parameter(filed, client):
    headers = _agent(filed)
    whole = client.get(CONTEXT, params={"user_id": "u1"}, headers=headers).text
    assert "Lisbon venue" in whole and "deposit" in whole
    travel = client.get(CONTEXT, params={"user_id": "u1", "category": "travel"}, headers=headers)
    assert travel.status_code == 200 and "Lisbon venue" in travel.text and "deposit" not in travel.text
    both = client.get(CONTEXT, params=[("user_id", "u1"), ("category", "travel"), ("category", "finance")],
                      headers=headers).text
    assert "Lisbon venue" in both and "deposit" in both
    zeus = client.get(CONTEXT, params={"user_id": "u1", "format": "json", "metadata": json.dumps({"project": "zeus"})},
                      headers=headers).json()
    assert [f["text"] for f in zeus["facts"]] == ["The venue deposit for the launch is paid"]


@pytest.mark.parametrize(("params", "where", "why"), [
    ({"metadata": "{project: apollo}"}, "query metadata", "is not JSON"),
    ({"metadata": '["apollo"]'}, "query metadata", "is JSON list; expected an object"),
    ({"metadata": "[" * 3000}, "query metadata", "nests deeper than a filter reads"),
    ({"metadata": '{"tier": NaN}'}, "query metadata", "NaN is not a JSON value"),
    ({"metadata": '{"colour": "red"}'}, "query metadata.colour", "not a filterable metadata key"),
    ({"category": "travle"}, "query category[0]", "'travle' is not a category of agent 'A'"),
])
def test_a_bad_context_filter_is_a_422_naming_the_query_parameter(filed, client, params, where, why):
    answer = client.get(CONTEXT, params={"user_id": "u1", **params}, headers=_agent(filed))
    assert answer.status_code == 422, answer.text
    assert answer.json()["where"] == where and why in answer.json()["why"], answer.json()


@pytest.mark.parametrize("narrowing", [
    {"categories": ["travel"]}, {"metadata": {"project": "apollo"}}, {"metadata": {"tier": [2]}},
    {"categories": ["travel", "finance"], "metadata": {"project": ["apollo", "zeus"]}},
])
def test_a_filter_never_shows_a_user_token_another_users_facts(filed, client, narrowing):
    headers = {"Authorization": f"Bearer {filed.token(user='u1', session='s1')}"}
    unfiltered = set(_ids(client.post(SEARCH, json={"query": "u2 books the Porto venue"}, headers=headers)))
    narrowed = set(_ids(client.post(SEARCH, json={"query": "u2 books the Porto venue", **narrowing}, headers=headers)))
    assert "v-u1" in narrowed and narrowed <= unfiltered and "v-u2" not in unfiltered
    params = [("category", c) for c in narrowing.get("categories", [])]
    params += [("metadata", json.dumps(narrowing["metadata"]))] if "metadata" in narrowing else []
    context = client.get(CONTEXT, params=params, headers=headers)
    assert context.status_code == 200 and "Lisbon venue" in context.text and "Porto venue" not in context.text


def test_a_filter_key_that_is_a_lone_surrogate_is_a_422_that_names_it_escaped(filed, client):
    """A JSON ``\\ud800`` key reaches the filter check as a lone surrogate, which the error
    names; the answer escapes it rather than failing to encode it (a 500)."""
    headers = {**_agent(filed), "Content-Type": "application/json"}
    answer = client.post(SEARCH, content='{"query": "venue", "user_id": "u1", "metadata": {"\\ud800": 1}}',
                         headers=headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["where"] == "body metadata.\\ud800"
    assert "not a filterable metadata key" in answer.json()["why"]
    context = client.get(CONTEXT, params={"user_id": "u1", "metadata": '{"\\ud800": 1}'}, headers=_agent(filed))
    assert context.status_code == 422 and context.json()["where"] == "query metadata.\\ud800", context.text
