"""An owner (and a user, in their own memory) writes memory directly over HTTP, and imports JSON
Lines (design §13 "Direct writes and import"): stored verbatim with no model call, screened,
embedded, stamped with where it came from, a duplicate refused naming the holder; an import
keeps every good line, reports each bad one by number and field, and adds nothing twice."""

from __future__ import annotations

import json

import pytest

from schemas.api_settings import ApiSettings
from tests.api.harness import SECRET, build, seed_memory
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


@pytest.fixture
def owner(api):
    return {"Authorization": f"Bearer {api.keys['curator_a']}"}


def _context(client, api, user="u1") -> str:
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    return client.get(f"/v1/agents/A/sessions/s1/context?user_id={user}", headers=runtime).text


def test_an_owner_adds_an_agent_fact_verbatim_and_every_context_shows_it_at_once(api, client, owner):
    _context(client, api)  # cached before the write
    added = client.post("/v1/agents/A/memory/facts", json={"content": "The launch party is on the roof terrace",
                                                           "categories": ["projects"]}, headers=owner)
    assert added.status_code == 201, added.text
    body = added.json()
    assert body["content"] == "The launch party is on the roof terrace" and body["scope"] == "agent"
    assert body["source"]["written_by"] == "owner"
    [stored] = api.deps.store.facts.get_facts([body["id"]])
    assert (stored.source, stored.categories, stored.source_user_ids) == ("owner", ["projects"], [])
    assert stored.embedding is not None and stored.embedding_model == api.deps.embedder.model
    assert "roof terrace" in _context(client, api)
    assert api.runs == [] and api.publisher.events == []  # no formation, no model call
    assert "item.add" in {e.action for e in api.deps.store.access.list_audit()}
    assert "roof terrace" not in "".join(e.model_dump_json() for e in api.deps.store.access.list_audit())


def test_the_same_text_again_is_a_409_naming_the_fact_that_holds_it(api, client, owner):
    # the seeded agent fact, in other case and spacing
    again = client.post("/v1/agents/A/memory/facts", json={"content": "the mars  launch is on 12 march"}, headers=owner)
    assert again.status_code == 409, again.text
    assert again.json()["where"] == "body content" and "f-agent-u1" in again.json()["why"]


@pytest.mark.parametrize("content, status, why", [
    ("The door code is 4512", 422, "access code"),
    ("Write to alice@example.com about the venue", 422, "email"),
    ("one " * 40, 422, "more than 30 words"),
])
def test_a_write_with_a_secret_contact_data_or_too_many_words_is_refused_and_stores_nothing(
        api, client, owner, content, status, why):
    before = api.deps.store.facts.count_facts("A", "agent")
    response = client.post("/v1/agents/A/memory/facts", json={"content": content}, headers=owner)
    assert response.status_code == status and why in response.json()["why"], response.text
    assert api.deps.store.facts.count_facts("A", "agent") == before


def test_a_user_adds_to_their_own_memory_only_and_the_runtime_key_writes_nothing(api, client):
    alice = {"Authorization": f"Bearer {api.token(user='u1')}"}
    mine = client.post("/v1/agents/A/users/u1/memory/facts", json={"content": "Alice is vegetarian"}, headers=alice)
    assert mine.status_code == 201, mine.text
    assert api.deps.store.facts.get_facts([mine.json()["id"]])[0].source == "user"
    assert "vegetarian" in _context(client, api)
    theirs = client.post("/v1/agents/A/users/u2/memory/facts", json={"content": "Bob is vegetarian"}, headers=alice)
    assert theirs.status_code == 403 and theirs.json()["where"] == "path user_id"
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    assert client.post("/v1/agents/A/memory/facts", json={"content": "x is y"}, headers=runtime).status_code == 403


def test_a_user_who_switched_memory_off_gets_nothing_written_even_by_the_owner(api, client, owner):
    api.deps.store.access.set_user_memory("A", "u2", False, api.deps.clock.now())
    response = client.post("/v1/agents/A/users/u2/memory/facts", json={"content": "Bob likes tea"}, headers=owner)
    assert response.status_code == 422 and "switched their memory" in response.json()["why"]


def test_an_owner_adds_reflections_to_the_agent_buffer_and_a_repeat_is_refused(api, client, owner):
    added = client.post("/v1/agents/A/memory/reflections", json={"content": "The team wants a recap after each call"},
                        headers=owner)
    assert added.status_code == 201, added.text
    listed = client.get("/v1/agents/A/memory/reflections", headers=owner).json()["reflections"]
    assert added.json()["id"] in [r["id"] for r in listed]
    again = client.post("/v1/agents/A/memory/reflections", json={"content": "the team wants a recap after each call"},
                        headers=owner)
    assert again.status_code == 409 and added.json()["id"] in again.json()["why"]
    session = client.post("/v1/agents/A/memory/reflections", json={"content": "Keep it short", "session_id": "s1"},
                          headers=owner)
    assert session.status_code == 201
    assert [r.content for r in api.deps.store.reflections.unabsorbed_reflections("A", "session:s1")] == ["Keep it short"]


def test_a_write_into_a_session_the_agent_does_not_have_is_a_404_naming_the_session(api, client, owner):
    store = api.deps.store
    store.ingest.declare_session_users("s-b", "B", ["u2"])   # another agent's session is none of A's
    for session_id in ("s9", "s-b"):
        added = client.post("/v1/agents/A/memory/reflections", json={"content": "Keep it short",
                                                                     "session_id": session_id}, headers=owner)
        assert added.status_code == 404, added.text
        assert added.json()["where"] == "body session_id"
        assert added.json()["why"].startswith("no such session (erased, or never stored)")
        assert f"{session_id!r}" in added.json()["why"]
        section = client.put("/v1/agents/A/memory/blob/sections/tone", headers=owner,
                             json={"scope": "session", "session_id": session_id, "bullets": ["Keep it short"]})
        assert section.status_code == 404 and section.json()["where"] == "body session_id", section.text
        assert store.reflections.unabsorbed_reflections("A", f"session:{session_id}") == []
        assert store.blobs.get_blob("A", f"session:{session_id}") is None


def _lines(*rows) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()


def test_an_import_keeps_every_good_line_reports_each_bad_one_and_adds_nothing_twice(api, client, owner):
    body = _lines(
        {"user_id": "u1", "text": "Alice renews her contract in June", "categories": ["finance"]},
        {"user_id": "u2", "text": "Bob's team has twelve seats", "expires_at": "2027-01-01T00:00:00Z"},
        "{not json",
        {"user_id": "u2", "txt": "misspelt"},
        {"user_id": "u1", "text": "The alarm code is 1234"},
        "",
        {"user_id": "u1", "text": "Alice prefers invoices by post", "categories": ["billing"]},
    )
    headers = {**owner, "Content-Type": "application/x-ndjson"}
    first = client.post("/v1/agents/A/import", content=body, headers=headers)
    assert first.status_code == 200, first.text
    report = first.json()
    assert (report["added"], report["rejected"]) == (2, 4)
    assert [(r["line"], r["field"]) for r in report["rejects"]] == [
        (3, "line"), (4, "txt"), (5, "text"), (7, "categories[0]")]
    assert "unknown field" in report["rejects"][1]["why"] and "access code" in report["rejects"][2]["why"]
    assert "'billing' is not one of the agent's categories" in report["rejects"][3]["why"]
    assert "contract in June" in _context(client, api)
    [seats] = [f for f in api.deps.store.facts.list_facts("A", "user:u2") if "twelve" in f.content]
    assert seats.source == "import" and seats.expires_at is not None and seats.source_user_ids == ["u2"]
    second = client.post("/v1/agents/A/import", content=body, headers=headers).json()
    assert (second["added"], second["unchanged"]) == (0, 2)


def test_an_import_of_the_export_format_names_a_line_of_another_agent(api, client, owner):
    exported = client.get("/v1/agents/A/users/u1/export",
                          headers={"Authorization": f"Bearer {api.keys['admin']}"}).text.splitlines()
    facts = [json.loads(line) for line in exported if json.loads(line)["kind"] == "fact"]
    moved = {**facts[0], "agent_id": "B", "fact_id": "f-new"}
    report = client.post("/v1/agents/A/import", content=_lines(*exported, moved), headers=owner).json()
    assert report["rejects"] == [{"line": len(exported) + 1, "field": "agent_id",
                                  "why": "this line is of agent 'B', the import is into 'A'"}]
    assert report["added"] == 0 and report["unchanged"] >= len(facts)  # every item is still there


def test_an_import_larger_than_its_limit_is_a_413_naming_the_limit(store):
    api = build(store, api_settings=ApiSettings(_env_file=None, token_secrets={"k1": SECRET}, rate_limit_per_minute=0,
                                                max_body_bytes=1024, import_max_bytes=4096))
    seed_memory(store, api.deps.clock.now())
    owner = {"Authorization": f"Bearer {api.keys['curator_a']}"}
    body = _lines(*({"user_id": "u1", "text": f"Alice fact number {i}"} for i in range(200)))
    with api.client() as client:
        declared = client.post("/v1/agents/A/import", content=body, headers=owner)
        streamed = client.post("/v1/agents/A/import", content=iter([body[:3000], body[3000:]]), headers=owner)
        small = client.post("/v1/agents/A/import", content=body[:2000].rsplit(b"\n", 1)[0], headers=owner)
    assert declared.status_code == 413 and "more than 4096 bytes" in declared.json()["why"]
    assert streamed.status_code == 413 and "lines were imported" in streamed.json()["why"]
    assert small.status_code == 200 and small.json()["added"] > 0  # past the 1 KiB of other bodies


def test_an_empty_import_is_a_422(client, owner):
    answer = client.post("/v1/agents/A/import", content=b"", headers=owner)
    assert answer.status_code == 422 and answer.json()["where"] == "body"


def test_an_import_updates_a_known_key_and_names_each_line_that_met_a_retired_fact(api, client, owner):
    headers = {**owner, "Content-Type": "application/x-ndjson"}
    row = {"user_id": "u2", "text": "Bob renews in June", "import_key": "crm-7"}
    assert client.post("/v1/agents/A/import", content=_lines(row), headers=headers).json()["added"] == 1
    newer = client.post("/v1/agents/A/import", content=_lines({**row, "text": "Bob renews in July"}),
                        headers=headers).json()
    assert (newer["added"], newer["updated"], newer["unchanged"], newer["skips"]) == (0, 1, 0, [])
    store = api.deps.store
    [fact] = [f for f in store.facts.list_facts("A", "user:u2") if "renews" in f.content]
    assert (fact.content, [h.content for h in fact.history]) == ("Bob renews in July", ["Bob renews in June"])
    assert store.facts.retire_fact(fact.fact_id, api.deps.clock.now(), "r-later", reason="contradicted")
    late = client.post("/v1/agents/A/import", content=_lines({**row, "text": "Bob renews in May"}),
                       headers=headers).json()
    assert (late["updated"], late["skipped"]) == (0, 1)
    assert [s["line"] for s in late["skips"]] == [1]
    assert late["skips"][0]["why"].startswith("the fact under this key was retired (contradicted)")


def test_a_written_fact_keeps_metadata_of_the_agents_filterable_keys_and_any_other_key_is_a_422(api, client, owner):
    client.put("/v1/agents/A/metadata-keys", json={"metadata_keys": ["project", "tier"]}, headers=owner)
    added = client.post("/v1/agents/A/memory/facts", json={"content": "The launch party is on the roof terrace",
                                                           "metadata": {"project": "apollo", "tier": 2}}, headers=owner)
    assert added.status_code == 201 and added.json()["metadata"] == {"project": "apollo", "tier": 2}, added.text
    assert api.deps.store.facts.get_facts([added.json()["id"]])[0].metadata == {"project": "apollo", "tier": 2}
    other = client.post("/v1/agents/A/memory/facts", json={"content": "The venue has a lift",
                                                           "metadata": {"plan": "pro"}}, headers=owner)
    assert other.status_code == 422 and other.json()["where"] == "body metadata.plan", other.text
    assert "not one of the agent's filterable keys: project, tier" in other.json()["why"]
    fraction = client.post("/v1/agents/A/memory/facts", json={"content": "The venue has a lift",
                                                              "metadata": {"tier": 1.5}}, headers=owner)
    assert fraction.status_code == 422 and fraction.json()["where"] == "body metadata.tier", fraction.text
