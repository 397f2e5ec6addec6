"""Provider faults and hostile answers through real workers (design §5): every run completes or
fails with a recorded reason and is picked up again; nothing is silently empty, applied twice,
or stored outside the scopes, agent and user its run allows."""

from __future__ import annotations

import pytest

from testkit.scenarios.faults import run_faults

pytestmark = pytest.mark.integration


def _summary(figures: dict) -> dict:
    return {k: v for k, v in figures.items() if k != "samples"}


def test_transient_invalid_and_out_of_candidate_answers_leave_every_run_formed_once(tmp_path, needs_redis):
    # 8 sessions, 2 agents, 3 recurring users: some user meets the same agent twice
    figures = run_faults(tmp_path, sessions=8, seed=21, faults="transient=0.3,invalid=0.1,outside=0.5")
    injected = figures["faults_injected"]
    assert sum(injected.values()) >= 5 and figures["outside_ids_injected"] >= 1, _summary(figures)
    assert figures["settled"], _summary(figures)
    assert figures["formations_completed"] + figures["dead_runs"] == figures["runs"] > 0
    assert all(reason for reason in figures["dead_reasons"]), "a dead run must say why"
    assert (figures["stuck_runs"], figures["messages_unformed"] if not figures["dead_runs"] else 0) == (0, 0)
    assert figures["messages_not_ingested"] == 0, _summary(figures)
    assert figures["silently_empty"] == 0, figures["samples"]["silently_empty"]
    assert figures["outside_effects"] == 0
    assert (figures["duplicate_facts"], figures["duplicate_reflections"]) == (0, 0), _summary(figures)
    assert (figures["lost_reflections"], figures["lost_facts"], figures["leaks"]) == (0, 0, 0), figures["samples"]
    assert figures["facts"] > 0 and figures["reflections"] > 0
    assert figures["worker_crashes"] == 0


def test_a_hostile_provider_and_injected_messages_cannot_move_memory_across_scopes(tmp_path, needs_redis):
    from pipeline.store.sqlite import SQLiteStore

    figures = run_faults(tmp_path, sessions=6, seed=22, hostile=True, faults="outside=0.5")
    assert figures["hostile_answers"] > 0 and figures["settled"], _summary(figures)
    assert figures["leaks"] == 0, figures["samples"]["leaks"]
    assert figures["outside_effects"] == 0
    store = SQLiteStore(str(tmp_path / "memory.db"))
    try:
        dump = store.admin.dump_all()
    finally:
        store.close()
    # agent-1 has user memory off; group chats form no user memory; user memory names its one human
    runs = {r["run_id"]: r for r in dump["runs"]}
    for item in dump["facts"] + dump["reflections"]:
        if item["scope"] == "user":
            run = runs[item["source_run_id"]]
            assert item["agent_id"] == "agent-0", item
            assert not run["group_chat"] and [item["user_id"]] == run["user_ids"], (item, run["user_ids"])
    assert any(f["scope"] == "user" for f in dump["facts"]), "the hostile answers were never exercised"
