"""Store.begin_stage (lease renewal and start_stage in one step) and the in-place stage patches
of the SQLite adapter: the same outcomes as the separate calls, on both adapters."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.trigger import ClaimRule
from schemas.documents import StageRecord
from testkit.documents import at, message, run

ANY = ClaimRule(min_messages=1)


@pytest.fixture
def claimed(store):
    for n in (1, 2, 3):
        store.ingest.ingest_message(message(n), at(n))
    return store.runs.try_claim("s1", ANY, run("r1"), at(10), 60)


def test_begin_stage_renews_the_lease_and_starts_the_stage(store, claimed):
    begun_run, record = store.runs.begin_stage("r1", "extract_facts", at(30), 60)
    assert (record.status, record.attempts, record.started_at) == ("running", 1, at(30))
    assert (begun_run.status, begun_run.lease_expires_at) == ("running", at(90))
    assert begun_run.stages["extract_facts"] == record
    stored = store.runs.get_run("r1")
    assert stored.stages["extract_facts"] == record
    assert (stored.status, stored.lease_expires_at) == ("running", at(90))
    assert store.ingest.get_session("s1").lease_expires_at == at(90)


def test_begin_stage_counts_attempts_and_returns_a_done_stage_unchanged(store, claimed):
    store.runs.begin_stage("r1", "extract_facts", at(11), 60)
    assert store.runs.begin_stage("r1", "extract_facts", at(12), 60)[1].attempts == 2
    assert store.runs.complete_stage("r1", "extract_facts", StageRecord(output={"facts": ["x"]})) is True
    begun_run, record = store.runs.begin_stage("r1", "extract_facts", at(40), 60)
    assert (record.status, record.output, record.attempts) == ("done", {"facts": ["x"]}, 2)
    assert begun_run.lease_expires_at == at(100) and store.runs.get_run("r1").lease_expires_at == at(100)


def test_begin_stage_on_a_finished_or_unknown_run_starts_nothing(store, claimed):
    store.runs.finish_run("r1", at(20), {}, [])
    assert store.runs.begin_stage("r1", "embed_facts", at(21), 60) is None
    assert "embed_facts" not in store.runs.get_run("r1").stages
    assert store.runs.begin_stage("nope", "embed_facts", at(21), 60) is None


def test_stage_patches_keep_every_other_stage_and_field_intact(store, claimed):
    store.runs.update_run_fields("r1", models={"fast": "m"}, scopes_enabled=["user"])
    vectors = [[0.1, -2.5e-07, 3.0], [1e-30, 0.0, -1.0]]
    store.runs.begin_stage("r1", "embed_facts", at(11), 60)
    store.runs.complete_stage("r1", "embed_facts", StageRecord(output={"vectors": vectors, "text": "café \"x\""},
                                                          duration_ms=1.5))
    store.runs.begin_stage("r1", "consolidate_scope:0", at(12), 60)
    store.runs.complete_stage("r1", "consolidate_scope:0", StageRecord(output={"status": "merged"}))
    stored = store.runs.get_run("r1")
    assert stored.models == {"fast": "m"} and stored.scopes_enabled == ["user"]
    assert stored.stages["embed_facts"].output == {"vectors": vectors, "text": "café \"x\""}
    assert stored.stages["embed_facts"].duration_ms == 1.5
    assert list(stored.stages) == ["embed_facts", "consolidate_scope:0"]
    assert stored.stages["consolidate_scope:0"].output == {"status": "merged"}
    assert store.runs.list_runs(status="running")[0].run_id == "r1"


def test_complete_stage_of_an_unknown_run_raises_key_error(store, claimed):
    with pytest.raises(KeyError):
        store.runs.complete_stage("nope", "embed_facts", StageRecord(output={}))


def test_run_status_follows_every_change_of_the_run(store, claimed):
    assert store.runs.run_status("r1") == "claimed"
    store.runs.begin_stage("r1", "extract_facts", at(11), 60)
    assert store.runs.run_status("r1") == "running"
    store.runs.fail_run("r1", "boom", at(12), dead=False)
    assert store.runs.run_status("r1") == "failed"
    store.runs.reopen_run("r1", at(13), 60)
    assert store.runs.run_status("r1") == "claimed"
    store.runs.finish_run("r1", at(14), {}, [])
    assert store.runs.run_status("r1") == store.runs.get_run("r1").status == "done"
    assert store.runs.run_status("nope") is None


def test_run_status_sees_a_run_ended_by_erasure(store, claimed):
    store.runs.begin_stage("r1", "extract_facts", at(11), 60)
    store.admin.forget_user("u1", "a1")
    assert store.runs.run_status("r1") == store.runs.get_run("r1").status == "erased"


def test_run_field_patches_check_values_and_keep_the_queried_columns(store, claimed):
    store.runs.begin_stage("r1", "extract_facts", at(11), 60)
    store.runs.complete_stage("r1", "extract_facts", StageRecord(output={"facts": [{"text": "x", "score": 0.1}]}))
    with pytest.raises(ValidationError):
        store.runs.update_run_fields("r1", status="half-done")
    with pytest.raises(ValidationError):
        store.runs.update_run_fields("r1", models={"fast": ["not", "a", "name"]})
    assert store.runs.run_status("r1") == "running" and store.runs.get_run("r1").models == {}
    store.runs.update_run_fields("r1", status="failed", error="stopped by hand", lease_expires_at="2030-01-01T00:00:00Z")
    stale = store.runs.find_stale_runs(at(12), 10)
    assert [(r.run_id, r.status, r.error) for r in stale] == [("r1", "failed", "stopped by hand")]
    assert store.runs.list_runs(status="failed")[0].stages["extract_facts"].output == {"facts": [{"text": "x", "score": 0.1}]}
    store.runs.reopen_run("r1", at(13), 60)
    assert store.runs.finish_run("r1", at(14), {"facts": 1}, ["user:u1"]) is True
    done = store.runs.get_run("r1")
    assert (done.status, done.finished_at, done.totals, done.lease_expires_at, done.error) == \
        ("done", at(14), {"facts": 1}, None, None)
    assert store.runs.list_runs(status="done")[0].run_id == "r1" and store.runs.find_stale_runs(at(10**6), 10) == []
    assert store.runs.finish_run("r1", at(15), {}, []) is False and store.runs.get_run("r1").finished_at == at(14)
    with pytest.raises(KeyError):
        store.runs.update_run_fields("nope", models={"fast": "m"})


def test_mongo_begin_stage_parses_the_run_once_and_setting_fields_reads_none(monkeypatch):
    from pipeline.store.mongo import runs as mongo_runs
    from pipeline.store.mongo import MongoStore
    from testkit.mongo_emulation import emulated_database

    store = MongoStore(emulated_database(), prefix="memory2_")
    store.create_indexes()
    for n in (1, 2, 3):
        store.ingest.ingest_message(message(n), at(n))
    store.runs.try_claim("s1", ANY, run("r1"), at(10), 60)
    parsed, parse = [], mongo_runs.run_from
    monkeypatch.setattr(mongo_runs, "run_from", lambda doc: parsed.append(doc) or parse(doc))
    begun_run, record = store.runs.begin_stage("r1", "extract_facts", at(30), 60)
    assert len(parsed) == 1
    store.runs.update_run_fields("r1", models={"fast": "m"}, scopes_enabled=["user"])
    assert len(parsed) == 1
    monkeypatch.undo()
    assert store.runs.get_run("r1").models == {"fast": "m"}
    begun_run = begun_run.model_copy(update={"models": {"fast": "m"}, "scopes_enabled": ["user"]})
    assert begun_run == store.runs.get_run("r1") and record == begun_run.stages["extract_facts"]
    assert (begun_run.status, record.attempts) == ("running", 1)

