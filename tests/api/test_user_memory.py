"""Users' own memory over HTTP (seed 004, design §12): see it with history and sources, edit
one fact (an UPDATE with history, screened, caches invalidated), delete one item, switch user
memory off and on. Every change is audited without content."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipeline.store.port import FactUpdate
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


@pytest.fixture
def me(api):
    return {"Authorization": f"Bearer {api.token(user='u1')}"}


def _context(client, api):
    headers = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    return client.get("/v1/agents/A/sessions/s1/context", params={"user_id": "u1"}, headers=headers).text


def test_my_memory_lists_my_items_and_the_shared_ones_resting_only_on_me(client, me):
    body = client.get("/v1/agents/A/users/u1/memory", headers=me).json()
    assert [f["id"] for f in body["facts"]] == ["f-u1"] and body["facts"][0]["editable"] is True
    assert [f["id"] for f in body["shared_facts"]] == ["f-agent-u1"]  # not the one u2 shares
    assert body["shared_facts"][0]["editable"] is False
    assert [r["id"] for r in body["reflections"]] == ["r-u1"]
    assert [r["id"] for r in body["shared_reflections"]] == ["r-agent-u1"]
    assert "short answers" in body["blob"]["content"] and body["user_memory_enabled"] is True
    assert body["facts"][0]["source"]["session_id"] == "s1"


def test_an_edit_keeps_the_old_text_in_history_and_the_context_shows_the_new_one_at_once(api, client, me):
    assert "alice@example.com" in _context(client, api)  # cached now
    response = client.patch("/v1/agents/A/users/u1/memory/facts/f-u1", json={"content": "Alice's email is a@b.org"},
                            headers=me)
    assert response.status_code == 200, response.text
    fact = response.json()
    assert fact["content"] == "Alice's email is a@b.org" and fact["version"] == 2
    assert [h["content"] for h in fact["history"]] == ["Alice's email is alice@example.com"]
    context = _context(client, api)
    assert "a@b.org" in context and "alice@example.com" not in context
    entry = api.deps.store.access.list_audit(action="item.edit")[0]
    assert entry.credential_kind == "user" and "a@b.org" not in entry.model_dump_json()
    assert "u1" not in entry.model_dump_json()


def test_an_edit_sets_an_expiry_in_the_future_only_and_an_expired_fact_leaves_the_listing(api, client, me):
    url = "/v1/agents/A/users/u1/memory/facts/f-u1"
    past = client.patch(url, json={"content": "Alice's email is a@b.org", "expires_at": "2020-03-10T00:00:00Z"},
                        headers=me)
    assert past.status_code == 422 and past.json()["where"] == "body expires_at", past.text
    naive = client.patch(url, json={"content": "Alice's email is a@b.org", "expires_at": "2999-03-10T00:00:00"},
                         headers=me)
    assert naive.status_code == 422 and "expires_at" in naive.json()["where"], naive.text
    assert api.deps.store.facts.get_facts(["f-u1"])[0].version == 1
    done = client.patch(url, json={"content": "Alice's email is a@b.org", "expires_at": "2999-03-10T00:00:00Z"},
                        headers=me)
    assert done.status_code == 200 and done.json()["expires_at"] == "2999-03-10T00:00:00Z", done.text
    [listed] = client.get("/v1/agents/A/users/u1/memory", headers=me).json()["facts"]
    assert listed["expires_at"] == "2999-03-10T00:00:00Z"
    # null takes the expiry away (merge-patch); a missing field keeps it
    cleared = client.patch(url, json={"content": "Alice's email is a@b.org", "expires_at": None}, headers=me)
    assert cleared.status_code == 200 and cleared.json()["expires_at"] is None, cleared.text
    again = client.patch(url, json={"content": "Alice's email is a@b.org", "expires_at": "2999-03-10T00:00:00Z"},
                         headers=me)
    assert again.json()["expires_at"] == "2999-03-10T00:00:00Z"
    # the time passes (written to the store: the API takes no past expiry): out of the listing
    # and the context at once, before beat's task stamps it
    fact = api.deps.store.facts.get_facts(["f-u1"])[0]
    api.deps.store.facts.update_fact("f-u1", FactUpdate(
        content=fact.content, hash=fact.hash, embedding=fact.embedding, embedding_model=fact.embedding_model,
        run_id="edit:test", now=api.deps.clock.now(), expires_at=api.deps.clock.now() - timedelta(seconds=1)))
    assert client.get("/v1/agents/A/users/u1/memory", headers=me).json()["facts"] == []
    assert "a@b.org" not in _context(client, api)


def test_an_edit_that_carries_a_secret_is_refused_and_nothing_changes(api, client, me):
    response = client.patch("/v1/agents/A/users/u1/memory/facts/f-u1",
                            json={"content": "My password is hunter2-Secret!"}, headers=me)
    assert response.status_code == 422 and response.json()["where"] == "body content"
    assert "hunter2" not in response.text
    assert api.deps.store.facts.get_facts(["f-u1"])[0].content == "Alice's email is alice@example.com"


@pytest.mark.parametrize(("content", "value", "named"), [
    ("Use credentials admin:Tr0ub4dor&3 for the office router", "Tr0ub4dor", "sign-in credentials"),
    ("Alice's database is postgres://admin:s3cretpw@db.internal:5432/app", "s3cretpw", "sign-in credentials"),
    ("Login for the CMS: maya / Sunflower!9", "Sunflower", "sign-in credentials"),
    ("Alice's social security number is 123-45-6789", "6789", "government identifier"),
    ("Alice's door code is 4821", "4821", "access code"),
])
def test_an_edit_carrying_credentials_an_id_number_or_a_door_code_is_refused_by_kind(api, client, me, content,
                                                                                      value, named):
    response = client.patch("/v1/agents/A/users/u1/memory/facts/f-u1", json={"content": content}, headers=me)
    assert response.status_code == 422, response.text
    assert response.json()["where"] == "body content" and named in response.json()["why"]
    assert value not in response.text
    assert api.deps.store.facts.get_facts(["f-u1"])[0].content == "Alice's email is alice@example.com"


def test_shared_items_are_not_editable_but_deletable(api, client, me):
    edit = client.patch("/v1/agents/A/users/u1/memory/facts/f-agent-u1", json={"content": "x"}, headers=me)
    assert edit.status_code == 404
    gone = client.delete("/v1/agents/A/users/u1/memory/facts/f-agent-u1", headers=me)
    assert gone.status_code == 200 and api.deps.store.facts.get_facts(["f-agent-u1"]) == []
    shared = client.delete("/v1/agents/A/users/u1/memory/facts/f-agent-both", headers=me)
    assert shared.status_code == 404 and api.deps.store.facts.get_facts(["f-agent-both"]) != []
    assert "Mars launch" not in _context(client, api)


def test_deleting_an_absorbed_reflection_merges_the_blob_again_without_it(api, client, me):
    from datetime import timedelta

    from schemas.documents import ConsolidatedBlob, Reflection

    store, now = api.deps.store, api.deps.clock.now()
    store.reflections.insert_reflections([Reflection(reflection_id=rid, agent_id="A", scope="user", user_id="u1",
                                         scope_key="user:u1", content=text, source_user_ids=["u1"],
                                         formed_at=now - timedelta(hours=2))
                              for rid, text in (("r-old", "Alice prefers answers in Spanish."),
                                                ("r-keep", "Alice wants short answers."))])
    store.reflections.mark_absorbed(["r-old", "r-keep"], 2, now)
    blob = store.blobs.get_blob("A", "user:u1")
    store.blobs.save_blob(blob.model_copy(update={"version": 2, "absorbing_ids": ["r-old", "r-keep"],
                                            "consolidated_content": "VERSION: 2\nSpanish, short answers."}),
                    expected_version=1)
    response = client.delete("/v1/agents/A/users/u1/memory/reflections/r-old", headers=me)
    assert response.status_code == 200, response.text
    rebuilt = store.blobs.get_blob("A", "user:u1")
    assert rebuilt.version == 3 and rebuilt.absorbing_ids == ["r-keep"]
    assert "Spanish" not in rebuilt.consolidated_content
    assert "r-old" not in [r.reflection_id for r in store.reflections.list_reflections("A", "user:u1")]


def test_switching_off_keeps_items_hides_them_and_on_restores_them(api, client, me):
    before = _context(client, api)
    off = client.put("/v1/agents/A/users/u1/memory-setting", json={"enabled": False}, headers=me)
    assert off.status_code == 200 and off.json()["enabled"] is False
    hidden = _context(client, api)
    assert "alice@example.com" not in hidden and "short answers" not in hidden
    listed = client.get("/v1/agents/A/users/u1/memory", headers=me).json()
    assert listed["user_memory_enabled"] is False and [f["id"] for f in listed["facts"]] == ["f-u1"]
    client.put("/v1/agents/A/users/u1/memory-setting", json={"enabled": True}, headers=me)
    assert _context(client, api) == before
    assert [e.counts for e in api.deps.store.access.list_audit(action="user_memory.switch")] == [{"enabled": 1}, {"enabled": 0}]


def test_export_streams_json_lines_of_everything_about_me_and_nothing_of_others(client, me):
    import json

    response = client.get("/v1/agents/A/users/u1/export", headers=me)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    ids = {d["fact_id"] for d in lines if d["kind"] == "fact"}
    assert ids == {"f-u1", "f-agent-u1", "f-agent-both"}
    assert "Bob" not in response.text and "\"embedding\":" not in response.text, [l for l in response.text.splitlines() if "Bob" in l]


def test_forget_me_queues_a_job_whose_status_says_when_it_is_done(api, client, me):
    from usecases.jobs import finish_job, start_job

    queued = client.post("/v1/agents/A/users/u1/forget", headers=me)
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    job_id = queued.json()["job_id"]
    assert api.jobs == [job_id]
    # what the maintenance task does with it (workers.maintenance.run_job)
    finish_job(api.deps, start_job(api.deps.store, job_id))
    done = client.get(f"/v1/jobs/{job_id}", headers=me).json()
    assert done["status"] == "done" and done["counts"]["user_switches"] == 0
    assert api.deps.store.facts.get_facts(["f-u1", "f-agent-u1"]) == []
    assert api.deps.store.access.get_job(job_id).user_id is None
    from usecases.verify import traces

    assert traces(api.deps.store.admin.dump_all(), "u1", "A") == []


def _session_memory(api, session_id, users):
    from datetime import timedelta

    from schemas.documents import ConsolidatedBlob, Reflection

    store, now = api.deps.store, api.deps.clock.now()
    store.ingest.declare_session_users(session_id, "A", users)
    key = f"session:{session_id}"
    store.reflections.insert_reflections([Reflection(reflection_id=f"r-{session_id}", agent_id="A", scope="session",
                                         session_id=session_id, scope_key=key, content=f"goal of {session_id}",
                                         source_user_ids=users[:1], formed_at=now - timedelta(hours=1))])
    store.blobs.save_blob(ConsolidatedBlob(agent_id="A", scope="session", scope_key=key, session_id=session_id,
                                     consolidated_content=f"VERSION: 1\n[GOALS]\n- pinned {session_id}",
                                     word_limit=200, version=1), expected_version=0)


def test_a_user_sees_and_cleans_the_memory_of_their_own_one_to_one_sessions_only(api, client, me):
    _session_memory(api, "s-alone", ["u1"])
    _session_memory(api, "s-group", ["u1", "u2"])
    mine = client.get("/v1/agents/A/users/u1/memory", headers=me).json()
    assert [s["session_id"] for s in mine["sessions"]] == ["s-alone"]
    [alone] = mine["sessions"]
    assert "pinned s-alone" in alone["blob"]["content"] and alone["reflections"][0]["id"] == "r-s-alone"
    assert "s-group" not in str(mine)
    assert client.delete("/v1/agents/A/users/u1/memory/reflections/r-s-alone", headers=me).status_code == 200
    assert client.delete("/v1/agents/A/users/u1/memory/reflections/r-s-group", headers=me).status_code == 404
    assert api.deps.store.reflections.unabsorbed_reflections("A", "session:s-alone") == []
    assert [r.reflection_id for r in api.deps.store.reflections.unabsorbed_reflections("A", "session:s-group")] == ["r-s-group"]


def test_a_user_rewrites_a_section_of_their_own_blob_screened_and_nobody_else_can(api, client, me):
    path = "/v1/agents/A/users/u1/memory/blob/sections/preferences"
    done = client.put(path, json={"bullets": ["Alice wants answers in Portuguese"]}, headers=me)
    assert done.status_code == 200 and done.json()["version"] == 2
    assert "[PREFERENCES]\n- Alice wants answers in Portuguese" in done.json()["content"]
    assert api.deps.store.blobs.get_blob("A", "user:u1").edited_by is not None
    secret = client.put(path, json={"bullets": ["my password is hunter2-Secret!"]}, headers=me)
    assert secret.status_code == 422 and "hunter2" not in secret.text
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    bob = {"Authorization": f"Bearer {api.token(user='u2')}"}
    assert client.put(path, json={"bullets": ["x"]}, headers=runtime).status_code == 403
    assert client.put(path, json={"bullets": ["x"]}, headers=bob).status_code == 403
    assert api.deps.store.blobs.get_blob("A", "user:u1").version == 2
    assert [e.action for e in api.deps.store.access.list_audit(action="blob.edit")] == ["blob.edit"]


def test_a_user_edits_a_pending_reflection_with_history_and_not_an_absorbed_one(api, client, me):
    path = "/v1/agents/A/users/u1/memory/reflections/r-u1"
    done = client.patch(path, json={"content": "Alice wants answers in Portuguese"}, headers=me)
    assert done.status_code == 200, done.text
    assert done.json()["content"] == "Alice wants answers in Portuguese"
    assert done.json()["history"][0]["content"] == "reflection r-u1"
    listed = client.get("/v1/agents/A/users/u1/memory", headers=me).json()["reflections"]
    assert listed[0]["editable"] is True and listed[0]["content"] == "Alice wants answers in Portuguese"
    secret = client.patch(path, json={"content": "Alice's password is hunter2-Secret!"}, headers=me)
    assert secret.status_code == 422 and "hunter2" not in secret.text
    api.deps.store.reflections.mark_absorbed(["r-u1"], 2, api.deps.clock.now())
    assert client.patch(path, json={"content": "too late"}, headers=me).status_code == 404
    other = client.patch("/v1/agents/A/users/u1/memory/reflections/r-agent-u1", json={"content": "x y"}, headers=me)
    assert other.status_code == 404  # shared: the owner's to edit


def test_a_user_takes_their_part_out_of_a_shared_fact_which_stays_for_the_other(api, client, me):
    store = api.deps.store
    [seeded] = store.facts.get_facts(["f-agent-both"])  # u1 and u2, its text by an edit: not u1's words
    store.facts.insert_fact(seeded.model_copy(update={"fact_id": "f-crew", "content": "The Mars crew is six",
                                                "hash": "crew", "source_run_id": "edit:owner"}))
    response = client.post("/v1/agents/A/users/u1/memory/facts/f-crew/withdraw", headers=me)
    assert response.status_code == 200, response.text
    assert response.json() == {"withdrawn": "f-crew", "kind": "fact", "messages_out": 0, "versions_out": 0}
    [kept] = store.facts.get_facts(["f-crew"])
    assert kept.content == "The Mars crew is six" and kept.source_user_ids == ["u2"]
    assert "f-crew" not in {f.fact_id for f in store.provenance.resting_on("u1").facts}
    [entry] = store.access.list_audit(action="item.withdraw")
    assert entry.counts == {"facts": 1, "messages_out": 0} and "crew" not in entry.model_dump_json()
    # withdrawn once, it no longer rests on u1: nothing left to withdraw
    again = client.post("/v1/agents/A/users/u1/memory/facts/f-crew/withdraw", headers=me)
    assert again.status_code == 404 and again.json()["where"] == "path item_id"


def test_withdrawing_is_refused_where_the_text_may_be_mine_or_is_mine_alone(api, client, me):
    # f-agent-both has no stored run: its text may be u1's words
    refused = client.post("/v1/agents/A/users/u1/memory/facts/f-agent-both/withdraw", headers=me)
    assert refused.status_code == 409 and "ask the agent's owner" in refused.json()["why"]
    assert api.deps.store.facts.get_facts(["f-agent-both"])[0].source_user_ids == ["u1", "u2"]
    alone = client.post("/v1/agents/A/users/u1/memory/facts/f-agent-u1/withdraw", headers=me)
    assert alone.status_code == 409 and "remove it instead" in alone.json()["why"]
    reflection = client.post("/v1/agents/A/users/u1/memory/reflections/r-agent-u1/withdraw", headers=me)
    assert reflection.status_code == 409
    nobody = client.post("/v1/agents/A/users/u1/memory/facts/f-u2/withdraw", headers=me)
    assert nobody.status_code == 404 and nobody.json()["where"] == "path item_id"
    other = client.post("/v1/agents/A/users/u2/memory/facts/f-agent-both/withdraw", headers=me)
    assert other.status_code == 403
