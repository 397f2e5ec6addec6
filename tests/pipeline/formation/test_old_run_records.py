"""Runs stored by an earlier release read as they are, on both stores: their stage outputs lack
what was added since (screening counts, content-only vectors, effect versions, same-run counts,
section notes) and keep vectors as JSON lists. ``memoryctl runs`` shows them, ``finish`` closes
one left in flight by the upgrade, and the totals agree with what that release computed.

The fixtures (``tests/fixtures/old_runs``) are the run documents as that release stored them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from bson import json_util

from testkit.formation import ALICE_CHAT, make_atlas_env, make_env
from ops.runs import format_run
from usecases.runs import list_run_summaries
from pipeline.formation import finish, outputs
from pipeline.store._common import ts
from schemas.documents import FormationRun, Stage

FIXTURES = Path(__file__).parents[2] / "fixtures" / "old_runs"
SECOND_CHAT = [
    ("user", "u-1", "My email changed to alice@example.org."), ("assistant", None, "Noted."),
    ("user", "u-1", "And long answers are fine now. I live in Porto."), ("assistant", None, "Ok."),
]


def _old_documents(kind: str) -> list[dict]:
    if kind == "sqlite":
        return json.loads((FIXTURES / "sqlite_runs.json").read_text())
    return json_util.loads((FIXTURES / "mongo_runs.json").read_text())


@pytest.fixture(params=["sqlite", "mongo"])
def old_env(request, tmp_path):
    """The sessions and claims the old release made (same messages, same clock), with its run
    documents stored as it stored them: run-1 done, run-2 with every stage done but finish."""
    env = make_env(tmp_path) if request.param == "sqlite" else make_atlas_env(tmp_path)
    env.new_run(ALICE_CHAT, session_id="s-1", reason="session_end")
    env.new_run(SECOND_CHAT, session_id="s-2", reason="session_end")
    for doc in _old_documents(request.param):
        if request.param == "sqlite":
            with sqlite3.connect(tmp_path / "m.db") as conn:
                conn.execute(f"UPDATE {env.store.db.t('runs')} SET doc = ?, status = ?, lease_expires_at = ? "
                             "WHERE run_id = ?", (json.dumps(doc), doc["status"],
                                                  ts(FormationRun.model_validate(doc).lease_expires_at),
                                                  doc["run_id"]))
        else:
            assert env.store.col("runs").replace_one({"_id": doc["_id"]}, doc).matched_count == 1
    yield env
    env.store.close()


def test_every_stage_output_of_an_old_run_reads_as_its_model(old_env):
    for run_id in ("run-1", "run-2"):
        run = old_env.store.runs.get_run(run_id)
        for name, record in run.stages.items():
            assert outputs.parse(name, record.output) is not None, name
    embedded = outputs.read(old_env.store.runs.get_run("run-2"), Stage.EMBED_FACTS)
    assert isinstance(embedded.vectors, list)  # JSON lists, as stored then
    assert embedded.content_vectors() == embedded.fact_vectors() and len(embedded.fact_vectors()) == 3
    decided = outputs.read(old_env.store.runs.get_run("run-2"), Stage.DECIDE_FACTS)
    # stored before effects carried the version decided on: applied whatever the version, as then
    assert [(e.op, e.fact_id, getattr(e, "version", None)) for e in decided.effects] == [
        ("update", "run-1:0", None), ("retire", "run-1:1", None), ("insert", "run-2:1", None),
        ("insert", "run-2:2", None)]
    assert decided.merged_vector(0) is not None and decided.same_run.model_dump() == {}


def test_memoryctl_runs_shows_old_runs(old_env):
    summaries = {s["run_id"]: s for s in list_run_summaries(old_env.store)}
    assert summaries["run-1"]["status"] == "done" and summaries["run-2"]["status"] == "running"
    assert list(summaries["run-2"]["stages"]) == [
        "extract_facts", "embed_facts", "decide_facts", "extract_reflections", "consolidate"]
    for summary in summaries.values():
        assert "unreadable" not in summary
        assert (summary["secrets_dropped"], summary["contacts_rescoped"], summary["contacts_dropped"]) == (0, 0, 0)
        assert summary["tokens"]["calls"] > 0
    text = format_run(summaries["run-1"])
    assert "run-1" in text and "finish" in text and "unreadable" not in text


def test_run_totals_of_an_old_run_agree_with_what_its_release_computed(old_env):
    run = old_env.store.runs.get_run("run-1")
    then, now = run.totals, finish.run_totals(run)
    for key in ("consolidated", "dropped_other", "dropped_over_limit", "llm_calls", "reflections"):
        assert now[key] == then[key], key
    # computed then while finish was running: its own timing came after
    assert {k: v for k, v in now["timings_ms"].items() if k != Stage.FINISH} == then["timings_ms"]
    assert {k: now["facts"][k] for k in then["facts"]} == then["facts"]
    assert now["facts"]["same_run"] == {}  # not counted then
    assert {k: now["tokens"][k] for k in ("input", "output", "total")} == \
        {k: then["tokens"][k] for k in ("input", "output", "total")}


def test_finish_closes_a_run_left_in_flight_by_the_upgrade(old_env):
    result, step = finish.finish("run-2", old_env)
    assert result is not None and not result.reused
    run = old_env.store.runs.get_run("run-2")
    assert run.status == "done" and run.totals == result.value.totals
    facts = run.totals["facts"]
    assert (facts["added"], facts["updated"], facts["deleted"], facts["none"], facts["extracted"]) == (1, 1, 1, 0, 3)
    assert run.totals["reflections"] == {"agent": 0, "user": 1, "session": 1}
    assert run.totals["consolidated"] == {"user:u-1": "merged", "session:s-2": "merged"}
    assert run.stages[Stage.FINISH].output["changed"] == ["session:s-2", "user:u-1"]
    assert old_env.store.ingest.get_session("s-2").watermark == run.seq_to
    stamps = old_env.store.leases.get_scope_versions("agent-1", ["user:u-1", "session:s-2"])
    assert stamps["user:u-1"] > 0 and stamps["session:s-2"] > 0
    assert "unreadable" not in format_run(list_run_summaries(old_env.store, session_id="s-2")[0])
