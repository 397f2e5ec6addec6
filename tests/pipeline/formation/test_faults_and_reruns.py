"""Injected provider faults and crash-and-rerun of every stage: nothing is lost, nothing is
applied twice."""

from __future__ import annotations

import pytest

from pipeline.errors import InvalidLLMAnswer, PermanentError, RateLimited, TransientError
from pipeline.formation import consolidate_stages, finish as finish_mod, stages
from pipeline.llm.scripted import Fault

from testkit.formation import ALICE_CHAT, decisions, facts, merge_all, reflections, snapshot
from testkit.store_proxy import StoreProxy

EMAIL = "Alice's email is alice@example.com"
NEW_EMAIL = "Alice's email is alice@example.org now"
USER_REFLECTIONS = ["Alice prefers short answers", "Alice codes in Python", "Alice likes diagrams",
                    "Alice avoids long meetings"]


def script(env):
    """A run whose every LLM stage has work: an UPDATE, reflections over two thresholds."""
    env.llm.on("extract_facts", facts(("user", EMAIL)), times=1)
    env.llm.on("extract_reflections", reflections(), times=1)
    seed = env.new_run(ALICE_CHAT)
    env.through_reflections(seed)
    env.llm.on("extract_facts", facts(("user", NEW_EMAIL), ("agent", "The Mars Festival budget is $50,000")))
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, "Alice's email is alice@example.org")))
    env.llm.on("extract_reflections", reflections(user=USER_REFLECTIONS, session=["Draft the plan", "Pin the map",
                                                                                 "Check the index list", "Review Friday"]))
    env.llm.on("consolidate", merge_all)
    return env.new_run(ALICE_CHAT)


STAGE_ORDER = ["extract_facts", "embed_facts", "decide_facts", "extract_reflections", "consolidate",
               "consolidate_scope", "finish"]


def call(env, run_id, stage):
    if stage == "consolidate_scope":
        return [consolidate_stages.consolidate_scope(run_id, i, env)
                for i in range(len(env.store.runs.get_run(run_id).stages["consolidate"].output["due"]))]
    if stage == "consolidate":
        return consolidate_stages.consolidate(run_id, env)
    if stage == "finish":
        return finish_mod.finish(run_id, env)
    return getattr(stages, stage)(run_id, env)


def run_until(env, run_id, stage):
    """Run every stage before ``stage``."""
    for name in STAGE_ORDER[:STAGE_ORDER.index(stage)]:
        call(env, run_id, name)


FAULTS = [
    ("timeout", TransientError), ("rate_limit", RateLimited), ("server_error", TransientError),
    ("invalid_json", InvalidLLMAnswer), ("schema_violation", InvalidLLMAnswer), ("permanent", PermanentError),
]
LLM_STAGES = [("extract_facts", "extract_facts"), ("decide_facts", "decide_facts"),
              ("extract_reflections", "extract_reflections"), ("consolidate_scope", "consolidate")]


@pytest.mark.parametrize("stage,operation", LLM_STAGES)
@pytest.mark.parametrize("kind,error", FAULTS)
def test_a_faulty_answer_raises_its_error_applies_nothing_and_the_rerun_completes(env, stage, operation, kind, error):
    run_id = script(env)
    run_until(env, run_id, stage)
    env.llm.rules.insert(0, type(env.llm.rules[0])(operation, Fault(kind, retry_after=2.5), times=1))
    before = snapshot(env)
    with pytest.raises(error) as caught:
        call(env, run_id, stage)
    if kind == "rate_limit":
        assert caught.value.retry_after == 2.5
    assert snapshot(env) == before
    run = env.store.runs.get_run(run_id)
    pending = [n for n, r in run.stages.items() if n.startswith(stage) and r.status != "done"]
    assert pending, "the failed stage must not be recorded done"
    call(env, run_id, stage)
    for name in STAGE_ORDER[STAGE_ORDER.index(stage) + 1:]:
        call(env, run_id, name)
    assert env.store.runs.get_run(run_id).status == "done"


def _complete_run(env, run_id):
    for name in STAGE_ORDER:
        call(env, run_id, name)


def _reference(tmp_env_factory):
    env = tmp_env_factory()
    run_id = script(env)
    _complete_run(env, run_id)
    return snapshot(env), env.llm.counts()


@pytest.mark.parametrize("stage", STAGE_ORDER)
def test_a_redelivered_stage_reuses_its_output_and_applies_nothing_twice(env, stage):
    run_id = script(env)
    run_until(env, run_id, stage)
    call(env, run_id, stage)
    after_first, calls_first = snapshot(env), env.llm.counts()
    call(env, run_id, stage)
    assert snapshot(env) == after_first
    assert env.llm.counts() == calls_first
    for name in STAGE_ORDER[STAGE_ORDER.index(stage) + 1:]:
        call(env, run_id, name)
    assert env.store.runs.get_run(run_id).status == "done"


@pytest.mark.parametrize("stage", ["extract_facts", "embed_facts", "decide_facts", "extract_reflections",
                                   "consolidate", "consolidate_scope"])
def test_a_crash_after_the_effect_but_before_the_stage_was_recorded_applies_nothing_twice(env, stage):
    run_id = script(env)
    run_until(env, run_id, stage)
    call(env, run_id, stage)
    after_first = snapshot(env)
    # the crash: effects are in the store, but the stage record never reached "done"
    run = env.store.runs.get_run(run_id)
    forgotten = {n: r.model_copy(update={"status": "running", "output": None}) if n.startswith(stage) else r
                 for n, r in run.stages.items()}
    env.store.runs.update_run_fields(run_id, stages=forgotten)
    call(env, run_id, stage)
    assert snapshot(env) == after_first
    for name in STAGE_ORDER[STAGE_ORDER.index(stage) + 1:]:
        call(env, run_id, name)
    final = snapshot(env)
    facts_by_id = {row[0]: row for row in final["facts"]}
    assert len(facts_by_id) == 2  # the updated email (version 2) and the agent budget fact
    assert sorted(row[2] for row in facts_by_id.values()) == [1, 2]
    assert [row[3] for row in final["facts"] if row[2] == 2] == [1]  # one history entry
    assert all(row[2] == 1 for row in final["blobs"])


class CrashOnce(StoreProxy):
    """A store whose named method fails once after the given number of calls (a worker dying
    half way through a stage's effects)."""

    def __init__(self, store, method: str, after: int) -> None:
        super().__init__(store, self._crash)
        self._method, self._left = method, after

    def _crash(self, name, target):
        if name != self._method:
            return target

        def wrapped(*args, **kwargs):
            if self._left == 0:
                self._left = -1
                raise ConnectionError(f"worker lost during {name}")
            self._left -= 1
            return target(*args, **kwargs)

        return wrapped


@pytest.mark.parametrize("method,after", [("insert_fact", 0), ("update_fact", 0), ("insert_reflections", 0),
                                          ("mark_absorbed", 0), ("finish_run", 0)])
def test_a_crash_half_way_through_the_effects_is_completed_by_the_rerun(env, method, after):
    run_id = script(env)
    real = env.store
    env.store = CrashOnce(real, method, after)
    with pytest.raises(ConnectionError):
        _complete_run(env, run_id)
    env.store = real
    calls = env.llm.counts()
    _complete_run(env, run_id)  # the redelivery of every stage
    final = snapshot(env)
    assert env.store.runs.get_run(run_id).status == "done"
    assert len(final["facts"]) == 2
    assert [row[2] for row in final["blobs"]] == [1, 1]
    assert all(absorbed for *_, absorbed, _into in final["reflections"])
    assert env.llm.counts()["consolidate"] - calls.get("consolidate", 0) <= 2
