"""An owner's routes (design §13) as an owner's program sees them: Memory Instructions set,
refused with a clear 422, rolled back; pause shown in stats and status; resume with backfill
starting runs; every change audited without its text."""

from __future__ import annotations

import pytest

# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


@pytest.fixture
def owner(api):
    return {"Authorization": f"Bearer {api.keys['curator_a']}"}


def test_an_instruction_is_set_read_rolled_back_and_audited_without_its_text(api, client, owner):
    base = "/v1/agents/A/instructions/extraction/all"
    first = client.put(base, json={"text": "Keep the launch plan.\nignore: catering"}, headers=owner)
    assert first.status_code == 200 and first.json()["version"] == 1
    assert first.json()["set_by"] not in ("", None)
    assert client.put(base, json={"text": "focus: venue"}, headers=owner).json()["version"] == 2
    back = client.post(f"{base}/rollback", json={"version": 1}, headers=owner).json()
    assert (back["version"], back["rolled_back_to"], back["text"]) == (3, 1, "Keep the launch plan.\nignore: catering")
    listed = client.get("/v1/agents/A/instructions", headers=owner).json()
    assert [i["version"] for i in listed["history"]] == [1, 2, 3] and [i["version"] for i in listed["current"]] == [3]
    cleared = client.delete(base, headers=owner).json()
    assert cleared["text"] == "" and client.get("/v1/agents/A/instructions", headers=owner).json()["current"] == []
    admin = {"Authorization": f"Bearer {api.keys['admin']}"}
    entries = client.get("/v1/admin/audit?action=instructions.set", headers=admin).json()["entries"]
    assert len(entries) == 2 and all(e["subject"] == "extraction:all" for e in entries)
    assert "catering" not in client.get("/v1/admin/audit", headers=admin).text


@pytest.mark.parametrize("text, where, why", [
    ("The office router password is Tr0ub4dor&3xq", "body text", "carries a secret"),
    (" ".join(["budget"] * 301), "body text", "has 301 words; an instruction is at most 300 words"),
    ("focus: venue\u0000", "body text", "NUL"),
])
def test_a_bad_instruction_is_a_clear_422_and_stores_nothing(api, client, owner, text, where, why):
    response = client.put("/v1/agents/A/instructions/extraction/user", json={"text": text}, headers=owner)
    assert response.status_code == 422 and response.json()["where"] == where and why in response.json()["why"]
    assert "Tr0ub4dor" not in response.text
    assert client.get("/v1/agents/A/instructions", headers=owner).json()["history"] == []


def test_unknown_stage_or_scope_in_the_path_is_a_422_naming_it(client, owner):
    response = client.put("/v1/agents/A/instructions/dedup/all", json={"text": "x"}, headers=owner)
    assert response.status_code == 422 and response.json()["where"] == "path stage"


def test_pause_shows_in_stats_and_status_and_resume_backfills_only_when_asked(api, client, owner):
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    paused = client.post("/v1/agents/A/pause", json={"target": "session", "session_id": "s1"}, headers=owner)
    assert paused.status_code == 200 and paused.json()["scope_key"] == "session:s1"
    assert client.get("/v1/agents/A/pauses", headers=owner).json()["paused"][0]["scope_key"] == "session:s1"
    for route in ("stats", "status"):
        scopes = client.get(f"/v1/agents/A/{route}?session_id=s1&user_id=u1", headers=runtime).json()["scopes"]
        assert scopes["session:s1"]["paused"] is True and scopes["agent"]["paused"] is False, route
    resumed = client.post("/v1/agents/A/resume", json={"target": "session", "session_id": "s1"}, headers=owner)
    assert resumed.status_code == 200 and resumed.json()["backfill_runs"] == [] and api.runs == []
    again = client.post("/v1/agents/A/resume", json={"target": "session", "session_id": "s1"}, headers=owner)
    assert again.status_code == 422 and "not paused" in again.json()["why"]
    bad = client.post("/v1/agents/A/pause", json={"target": "session"}, headers=owner)
    assert bad.status_code == 422 and bad.json()["where"] == "body session_id"


def test_a_curators_key_cannot_read_or_publish_and_the_runtimes_key_cannot_curate(api, client, owner):
    runtime = {"Authorization": f"Bearer {api.keys['agent_a']}"}
    denied = client.put("/v1/agents/A/instructions/extraction/all", json={"text": "focus: venue"}, headers=runtime)
    assert denied.status_code == 403 and "curate" in denied.json()["why"]
    read = client.get("/v1/agents/A/sessions/s1/context?user_id=u1", headers=owner)
    assert read.status_code == 403 and "lacks the 'read' scope" in read.json()["why"]


def test_resume_with_backfill_starts_one_run_per_run_of_the_pause_that_left_the_scope_out(api, client, owner):
    from datetime import timedelta

    from schemas.documents import FormationRun

    client.post("/v1/agents/A/pause", json={"target": "agent"}, headers=owner)
    now = api.deps.clock.now() + timedelta(seconds=1)
    for run_id, scopes in (("r-paused", ["user", "session"]), ("r-other", ["agent", "user", "session"])):
        api.deps.store.runs.insert_run(FormationRun(run_id=run_id, agent_id="A", session_id="s1", seq_from=1, seq_to=4,
                                               reason="threshold", status="done", created_at=now, finished_at=now,
                                               scopes_enabled=scopes))
    resumed = client.post("/v1/agents/A/resume", json={"target": "agent", "backfill": True}, headers=owner).json()
    assert resumed["backfill_runs"] == ["r-paused-backfill-agent"] and api.runs == ["r-paused-backfill-agent"]
    run = api.deps.store.runs.get_run("r-paused-backfill-agent")
    assert (run.reason, run.only_scopes, run.seq_from, run.seq_to, run.status) == ("backfill", ["agent"], 1, 4, "claimed")
