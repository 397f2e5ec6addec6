"""Stage outputs are typed (``pipeline.formation.outputs``): what a stage writes is checked
against its model before it is stored, and what is stored reads back as that model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ops.runs import format_run
from usecases.runs import list_run_summaries
from pipeline.formation import finish, outputs, stages
from pipeline.formation.facts import FactFilter
from schemas.documents import Stage

from testkit.formation import ALICE_CHAT, facts, reflections

EMAIL = "Alice's email is alice@example.com"


def _done(env, run_id, stage):
    return env.store.runs.get_run(run_id).stages[stage]


def test_a_counter_the_output_does_not_declare_fails_the_stage_and_nothing_is_stored(env, monkeypatch):
    # a renamed counter used to be stored under its new name and read as 0 by every total
    counts = FactFilter.counts
    monkeypatch.setattr(FactFilter, "counts", lambda self: {
        ("over_word_limit" if k == "over_limit" else k): v for k, v in counts(self).items()})
    env.llm.on("extract_facts", facts(("user", EMAIL)))
    run_id = env.new_run(ALICE_CHAT)
    with pytest.raises(ValidationError, match="over_word_limit"):
        stages.extract_facts(run_id, env)
    assert _done(env, run_id, Stage.EXTRACT_FACTS).status != "done"


def test_stored_outputs_keep_their_shape_and_empty_count_maps_stay_empty(env):
    env.agent(user_memory_enabled=False, agent_memory_enabled=False)  # no fact scope: no LLM call
    run_id = env.new_run(ALICE_CHAT)
    stages.extract_facts(run_id, env)
    stored = _done(env, run_id, Stage.EXTRACT_FACTS).output
    assert stored["skipped"] and stored["facts"] == [] and stored["dropped"] == {} and stored["screened"] == {}
    assert stored["plan"]["fact_scopes"] == [] and set(stored["models"]) == {"fast", "tier"}


def test_a_rerun_reads_the_stored_output_as_the_model_the_first_run_computed(env):
    env.llm.on("extract_facts", facts(("user", EMAIL)))
    env.llm.on("extract_reflections", reflections(user=["Alice writes tersely"]))
    run_id = env.new_run(ALICE_CHAT)
    first = [stage(run_id, env) for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts)]
    again = [stage(run_id, env) for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts)]
    assert all(r.reused for r in again)
    assert [r.value for r in again] == [r.value for r in first]
    assert [r.output for r in again] == [r.output for r in first]
    assert isinstance(first[2].value.effects[0], outputs.Insert)


def test_fields_of_a_newer_release_are_ignored_when_read(env):
    env.llm.on("extract_facts", facts(("user", EMAIL)))
    run_id = env.new_run(ALICE_CHAT)
    stages.extract_facts(run_id, env)
    stored = _done(env, run_id, Stage.EXTRACT_FACTS).output
    newer = {**stored, "provenance_mode": "v2", "facts": [{**f, "valid_from": None} for f in stored["facts"]]}
    assert outputs.parse(Stage.EXTRACT_FACTS, newer) == outputs.parse(Stage.EXTRACT_FACTS, stored)


def test_an_output_that_does_not_read_is_named_with_its_stage_and_runs_still_lists_the_run(env):
    env.llm.on("extract_facts", facts(("user", EMAIL)))
    run_id = env.new_run(ALICE_CHAT)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    run = env.store.runs.get_run(run_id)
    broken = dict(run.stages[Stage.DECIDE_FACTS].output)
    broken["effects"] = [{"op": "merge", "fact_id": "x", "index": 0}]
    with pytest.raises(outputs.StageOutputInvalid, match=r"stage decide_facts .*effects\.0"):
        outputs.parse(Stage.DECIDE_FACTS, broken)
    run.stages[Stage.DECIDE_FACTS].output = broken
    with pytest.raises(outputs.StageOutputInvalid):
        finish.run_totals(run)  # never a silent 0 in the totals
    env.store.runs.complete_stage(run_id, Stage.EXTRACT_REFLECTIONS, run.stages[Stage.DECIDE_FACTS].model_copy(
        update={"output": {"reflections": [{"reflection_id": "r"}]}}))
    [summary] = list_run_summaries(env.store)
    assert "stage extract_reflections" in summary["unreadable"]
    assert "unreadable: the stored output of stage extract_reflections" in format_run(summary)
