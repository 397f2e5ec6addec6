"""An owner curates the agent's shared memory over HTTP (design §13): agent facts listed,
edited (an UPDATE with history, screened) and deleted; pending agent reflections listed and
deleted; a blob section rewritten and a user's blob replaced as new versions with the owner as
their source; every change audited without content, the context rebuilt at once."""

from __future__ import annotations

import pytest

# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


@pytest.fixture
def owner(api):
    return {"Authorization": f"Bearer {api.keys['curator_a']}"}


def _context(client, api) -> str:
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    return client.get("/v1/agents/A/sessions/s1/context?user_id=u1", headers=runtime).text


def test_an_owner_lists_edits_and_deletes_agent_facts_with_history_and_the_context_follows(api, client, owner):
    before = _context(client, api)
    listed = client.get("/v1/agents/A/memory/facts", headers=owner).json()
    assert listed["total"] == 2 and {f["id"] for f in listed["facts"]} == {"f-agent-u1", "f-agent-both"}
    edited = client.patch("/v1/agents/A/memory/facts/f-agent-both", json={"content": "The Mars budget is $60,000"},
                          headers=owner)
    assert edited.status_code == 200 and edited.json()["version"] == 2
    assert edited.json()["history"][0]["content"] == "The Mars budget is $50,000"
    after = _context(client, api)
    assert "$60,000" in after and "$50,000" not in after and before != after
    gone = client.delete("/v1/agents/A/memory/facts/f-agent-u1", headers=owner)
    assert gone.status_code == 200 and api.deps.store.facts.get_facts(["f-agent-u1"]) == []
    assert "Mars launch" not in _context(client, api)
    user_fact = client.patch("/v1/agents/A/memory/facts/f-u1", json={"content": "x is y"}, headers=owner)
    assert user_fact.status_code == 404  # a user's own fact is theirs, not the owner's
    entries = api.deps.store.access.list_audit()
    assert {"item.edit", "item.delete"} <= {e.action for e in entries}
    assert "60,000" not in "".join(e.model_dump_json() for e in entries)


@pytest.mark.parametrize("content, why", [
    ("The router password is Tr0ub4dor&3xq", "a secret"),
    ("Write to alice@example.com for the budget", "email"),
    ("The Mars budget\u0000 is $60,000", "NUL"),
])
def test_an_edit_with_a_secret_contact_data_or_nul_is_a_422_and_changes_nothing(api, client, owner, content, why):
    response = client.patch("/v1/agents/A/memory/facts/f-agent-both", json={"content": content}, headers=owner)
    assert response.status_code == 422 and response.json()["where"] == "body content" and why in response.json()["why"]
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].content == "The Mars budget is $50,000"


def test_a_pending_agent_reflection_is_listed_and_deleted(api, client, owner):
    listed = client.get("/v1/agents/A/memory/reflections", headers=owner).json()["reflections"]
    assert [r["id"] for r in listed] == ["r-agent-u1"]
    assert client.delete("/v1/agents/A/memory/reflections/r-agent-u1", headers=owner).status_code == 200
    assert client.get("/v1/agents/A/memory/reflections", headers=owner).json()["reflections"] == []
    assert client.delete("/v1/agents/A/memory/reflections/r-u1", headers=owner).status_code == 404  # user scope


def test_a_section_edit_is_a_new_version_by_the_owner_within_the_word_limit(api, client, owner):
    body = {"bullets": ["Launch on March 21 at Fabrica Braco de Prata", "Budget 12,000 euros"]}
    first = client.put("/v1/agents/A/memory/blob/sections/projects", json=body, headers=owner)
    assert first.status_code == 200, first.text
    blob = first.json()
    assert blob["version"] == 1 and blob["edited_by"] and "[PROJECTS]\n- Launch on March 21" in blob["consolidated_content"]
    assert "Budget 12,000 euros" in _context(client, api)
    again = client.put("/v1/agents/A/memory/blob/sections/PROJECTS", json={"bullets": ["Budget 13,000 euros"]},
                       headers=owner).json()
    assert again["version"] == 2 and "12,000" not in again["consolidated_content"]
    too_long = client.put("/v1/agents/A/memory/blob/sections/notes", headers=owner,
                          json={"bullets": [" ".join(["word"] * 500)] * 3})
    assert too_long.status_code == 422 and "holds at most" in too_long.json()["why"]
    secret = client.put("/v1/agents/A/memory/blob/sections/notes", headers=owner,
                        json={"bullets": ["The door code password is Tr0ub4dor&3xq"]})
    assert secret.status_code == 422 and secret.json()["where"] == "body bullets[0]"
    assert api.deps.store.blobs.get_blob("A", "agent").version == 2


def test_an_owner_replaces_a_users_blob_as_a_new_version(api, client, owner):
    replaced = client.put("/v1/agents/A/users/u1/memory/blob", headers=owner,
                          json={"content": "[PREFERENCES]\n- Alice wants answers in Portuguese"})
    assert replaced.status_code == 200 and replaced.json()["version"] == 2
    context = _context(client, api)
    assert "answers in Portuguese" in context and "short answers" not in context
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    assert client.put("/v1/agents/A/users/u1/memory/blob", headers=runtime,
                      json={"content": "x"}).status_code == 403


def test_an_owner_edits_a_pending_agent_reflection_with_history(api, client, owner):
    done = client.patch("/v1/agents/A/memory/reflections/r-agent-u1", json={"content": "The team plans on Mondays"},
                        headers=owner)
    assert done.status_code == 200 and done.json()["history"][0]["content"] == "reflection r-agent-u1"
    assert api.deps.store.reflections.unabsorbed_reflections("A", "agent")[0].content == "The team plans on Mondays"
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    assert client.patch("/v1/agents/A/memory/reflections/r-agent-u1", json={"content": "x y"},
                        headers=runtime).status_code == 403


def test_an_owner_edit_sets_and_clears_an_expiry_and_refuses_one_in_the_past(api, client, owner):
    url = "/v1/agents/A/memory/facts/f-agent-both"
    text = "The Mars budget is $50,000"
    past = client.patch(url, json={"content": text, "expires_at": "2020-03-10T00:00:00Z"}, headers=owner)
    assert past.status_code == 422 and past.json()["where"] == "body expires_at" and "not in the future" in past.text
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].version == 1
    dated = client.patch(url, json={"content": text, "expires_at": "2999-03-10T00:00:00Z"}, headers=owner)
    assert dated.status_code == 200 and dated.json()["expires_at"] == "2999-03-10T00:00:00Z", dated.text
    kept = client.patch(url, json={"content": "The Mars budget is $55,000"}, headers=owner)  # omitted: unchanged
    assert kept.json()["expires_at"] == "2999-03-10T00:00:00Z"
    cleared = client.patch(url, json={"content": "The Mars budget is $55,000", "expires_at": None}, headers=owner)
    assert cleared.status_code == 200 and cleared.json()["expires_at"] is None
    listed = {f["id"]: f for f in client.get("/v1/agents/A/memory/facts", headers=owner).json()["facts"]}
    assert listed["f-agent-both"]["expires_at"] is None


def test_an_owner_cannot_edit_a_fact_whose_expiry_passed_back_to_life(api, client, owner):
    from datetime import timedelta

    from pipeline.store.port import FactUpdate

    fact = api.deps.store.facts.get_facts(["f-agent-both"])[0]
    api.deps.store.facts.update_fact("f-agent-both", FactUpdate(
        content=fact.content, hash=fact.hash, embedding=fact.embedding, embedding_model=fact.embedding_model,
        run_id="edit:test", now=api.deps.clock.now(), expires_at=api.deps.clock.now() - timedelta(seconds=1)))
    response = client.patch("/v1/agents/A/memory/facts/f-agent-both",
                            json={"content": "The Mars budget is $70,000", "expires_at": "2999-01-01T00:00:00Z"},
                            headers=owner)
    assert response.status_code == 409 and "expired at" in response.json()["why"], response.text
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].content == "The Mars budget is $50,000"
