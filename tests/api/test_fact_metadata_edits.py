"""Correcting a fact's metadata over HTTP (design §13 "Categories and metadata"), as an owner's
program and a user see it: a PATCH's ``metadata`` replaces what the fact holds, a search by the
old value no longer finds it and one by the new value does, omitted keeps it, {} or null takes
it off, and a key outside the agent's filterable ones is a 422 naming it that changes nothing."""

from __future__ import annotations

import pytest

# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

SEARCH = "/v1/agents/A/sessions/s1/search"
SHARED = "/v1/agents/A/memory/facts/f-agent-both"
MINE = "/v1/agents/A/users/u1/memory/facts/f-u1"


@pytest.fixture
def keyed(api):
    """Agent A with ``project`` and ``tier`` filterable, its shared budget fact of project apollo."""
    store = api.deps.store
    store.ingest.put_agent_settings(store.ingest.get_agent_settings("A").model_copy(
        update={"metadata_keys": ["project", "tier"]}))
    fact = store.facts.get_facts(["f-agent-both"])[0]
    store.facts.insert_fact(fact.model_copy(update={"fact_id": "f-apollo", "content": "The Venus budget is $9,000",
                                                    "hash": "h-venus", "metadata": {"project": "apollo"}}))
    return api


@pytest.fixture
def owner(api):
    return {"Authorization": f"Bearer {api.keys['curator_a']}"}


def _found(client, api, metadata, user_id=None) -> list[str]:
    ask = {"query": "budget email", "metadata": metadata, **({"user_id": user_id} if user_id else {})}
    answer = client.post(SEARCH, json=ask, headers={"Authorization": f"Bearer {api.keys['agent_a']}"})
    assert answer.status_code == 200, answer.text
    return [hit["id"] for hit in answer.json()["results"]]


def test_an_owner_corrects_a_shared_facts_metadata_and_searches_follow(keyed, client, owner):
    client.patch(SHARED, json={"content": "The Mars budget is $50,000", "metadata": {"project": "apollo"}},
                 headers=owner)
    assert "f-agent-both" in _found(client, keyed, {"project": "apollo"})
    edited = client.patch(SHARED, json={"content": "The Mars budget is $50,000",
                                        "metadata": {"project": "zeus", "tier": [1, 2, 1]}}, headers=owner)
    assert edited.status_code == 200, edited.text
    assert edited.json()["metadata"] == {"project": "zeus", "tier": [1, 2]}
    assert "f-agent-both" not in _found(client, keyed, {"project": "apollo"})
    assert "f-agent-both" in _found(client, keyed, {"project": "zeus", "tier": 2})
    stored = keyed.deps.store.facts.get_facts(["f-agent-both"])[0]
    # a change of metadata alone is an edit as a change of categories alone is: a version, the text in history
    assert stored.version == 3 and stored.history[-1].content == "The Mars budget is $50,000"
    admin = {"Authorization": f"Bearer {keyed.keys['admin']}"}
    actions = [e["action"] for e in client.get("/v1/admin/audit", headers=admin).json()["entries"]]
    assert actions.count("item.edit") == 2


def test_omitted_metadata_stays_and_an_empty_object_or_null_takes_it_off(keyed, client, owner):
    path = "/v1/agents/A/memory/facts/f-apollo"
    kept = client.patch(path, json={"content": "The Venus budget is $9,500"}, headers=owner)
    assert kept.status_code == 200 and kept.json()["metadata"] == {"project": "apollo"}, kept.text
    cleared = client.patch(path, json={"content": "The Venus budget is $9,500", "metadata": {}}, headers=owner)
    assert cleared.json()["metadata"] == {}
    assert "f-apollo" not in _found(client, keyed, {"project": "apollo"})
    client.patch(path, json={"content": "The Venus budget is $9,500", "metadata": {"tier": 3}}, headers=owner)
    nulled = client.patch(path, json={"content": "The Venus budget is $9,500", "metadata": None}, headers=owner)
    assert nulled.json()["metadata"] == {} and keyed.deps.store.facts.get_facts(["f-apollo"])[0].metadata == {}


def test_a_user_corrects_the_metadata_of_their_own_fact_within_the_agents_keys(keyed, client):
    user = {"Authorization": f"Bearer {keyed.token(user='u1')}"}
    text = "Alice's email is alice@example.com"
    edited = client.patch(MINE, json={"content": text, "metadata": {"project": "hera"}}, headers=user)
    assert edited.status_code == 200 and edited.json()["metadata"] == {"project": "hera"}, edited.text
    assert _found(client, keyed, {"project": "hera"}, user_id="u1") == ["f-u1"]
    refused = client.patch(MINE, json={"content": text, "metadata": {"email": "a@example.org"}}, headers=user)
    assert refused.status_code == 422 and refused.json()["where"] == "body metadata.email", refused.text
    assert "filterable keys: project, tier" in refused.json()["why"]
    assert keyed.deps.store.facts.get_facts(["f-u1"])[0].metadata == {"project": "hera"}


@pytest.mark.parametrize("metadata, where, why", [
    ({"plan": "pro"}, "body metadata.plan", "not one of the agent's filterable keys: project, tier"),
    ({"tier": 1.5}, "body metadata.tier", "is a fraction"),
    ({"tier": [1, 2.5]}, "body metadata.tier[1]", "is a fraction"),
    ({"tier": list(range(21))}, "body metadata.tier", "a key holds 1 to 20"),
    ({"tier": []}, "body metadata.tier", "a key holds 1 to 20"),
    ({"project": {"name": "apollo"}}, "body metadata.project", "is an object"),
])
def test_a_bad_metadata_value_or_key_is_a_422_naming_it_and_changes_nothing(keyed, client, owner, metadata, where,
                                                                            why):
    refused = client.patch("/v1/agents/A/memory/facts/f-apollo",
                           json={"content": "The Venus budget is $9,500", "metadata": metadata}, headers=owner)
    assert refused.status_code == 422 and refused.json()["where"] == where, refused.text
    assert why in refused.json()["why"]
    stored = keyed.deps.store.facts.get_facts(["f-apollo"])[0]
    assert (stored.version, stored.metadata) == (1, {"project": "apollo"})


@pytest.mark.parametrize("method, path", [("PATCH", "/v1/agents/A/memory/facts/f-apollo"),
                                          ("POST", "/v1/agents/A/memory/facts")])
def test_a_key_that_is_no_text_is_a_422_naming_it_by_its_escape_not_a_500(keyed, client, owner, method, path):
    body = b'{"content": "The Venus budget is $9,500", "metadata": {"\\ud800x": 1}}'
    refused = client.request(method, path, content=body, headers={**owner, "Content-Type": "application/json"})
    assert refused.status_code == 422 and refused.json()["where"] == "body metadata", refused.text
    assert "'\\ud800x' is not a metadata key" in refused.json()["why"]
    assert keyed.deps.store.facts.get_facts(["f-apollo"])[0].version == 1


def test_a_reflection_edit_refuses_a_facts_fields_rather_than_dropping_them(keyed, client, owner):
    pending = client.get("/v1/agents/A/memory/reflections", headers=owner).json()["reflections"]
    path = f"/v1/agents/A/memory/reflections/{pending[0]['id']}"
    refused = client.patch(path, json={"content": "The team wants weekly recaps", "metadata": {"project": "zeus"}},
                           headers=owner)
    assert refused.status_code == 422 and refused.json()["where"] == "body metadata", refused.text
    assert client.get("/v1/agents/A/memory/reflections", headers=owner).json()["reflections"] == pending
