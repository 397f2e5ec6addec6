"""The error policy of the formation tasks: transient errors retry with backoff honouring
Retry-After, exhausted retries fail the run (to be retried by the sweep), permanent errors kill
it at once with the reason, and a lease that stays busy skips the scope without losing it."""

from __future__ import annotations

import pytest
from celery.exceptions import Retry

from pipeline.formation import consolidate_stages as cs, stages
from pipeline.llm.scripted import Fault
from pipeline import names
from workers import consolidation as worker_consolidation, formation as worker_formation
from workers.consolidation import consolidate_scope
from workers.formation import guarded

from testkit.formation import ALICE_CHAT, facts, merge_all, reflections


@pytest.fixture
def attempt(delivery):
    """``attempt(run_id, retries, stage=..., fn=...)``: the stage under the error policy, as
    the worker's ``extract_facts`` (or ``consolidate_scope``) task runs it after ``retries``."""

    def run(run_id, retries=0, stage="extract_facts", fn=None):
        task = worker_formation.extract_facts if stage == "extract_facts" else consolidate_scope
        kwargs = {"run_id": run_id} if stage == "extract_facts" else {"run_id": run_id, "index": 0}
        with delivery(task, retries, **kwargs):
            return guarded(task, run_id, stage, fn or (lambda d: stages.extract_facts(run_id, d)))

    return run


def _run(env, fault=None):
    if fault is not None:
        env.llm.on("extract_facts", fault, times=1)
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")))
    return env.new_run(ALICE_CHAT)


def test_a_429_is_retried_no_sooner_than_its_retry_after(injected, attempt, sent):
    run_id = _run(injected, Fault("rate_limit", retry_after=42.0))
    with pytest.raises(Retry) as retried:
        attempt(run_id)
    assert retried.value.when >= 42.0
    assert sent == [(names.TASK_EXTRACT_FACTS, {"run_id": run_id})]  # the retry, sent by Celery
    assert injected.store.runs.get_run(run_id).stages["extract_facts"].status == "failed"
    assert injected.store.runs.get_run(run_id).status in ("claimed", "running")


@pytest.mark.parametrize("kind, bound", [
    ("timeout", "task_max_retries"), ("server_error", "task_max_retries"),
    # an answer that came back unusable is asked again only MEMORY_LLM_INVALID_ANSWER_RETRIES times
    ("invalid_json", "llm_invalid_answer_retries"), ("schema_violation", "llm_invalid_answer_retries"),
])
def test_transient_errors_retry_with_backoff_then_fail_the_run_for_the_sweep(injected, attempt, kind, bound):
    run_id = _run(injected, Fault(kind))
    with pytest.raises(Retry) as retried:
        attempt(run_id, retries=1)
    assert 1.0 <= retried.value.when <= 2.0  # 2 ** retries, with jitter in its upper half
    injected.llm.rules.insert(0, type(injected.llm.rules[0])("extract_facts", Fault(kind), times=1))
    assert attempt(run_id, retries=getattr(injected.settings, bound)) is None
    run = injected.store.runs.get_run(run_id)
    assert run.status == "failed"
    assert run.error.startswith("extract_facts: ") and "retries" in run.error


def test_a_permanent_error_kills_the_run_at_once_with_its_reason(injected, attempt):
    run_id = _run(injected, Fault("permanent"))
    assert attempt(run_id) is None
    run = injected.store.runs.get_run(run_id)
    assert run.status == "dead"
    assert "401" in run.error and "extract_facts" in run.error


def test_each_stage_task_hands_on_to_the_next_by_name(injected, sent):
    run_id = _run(injected)
    injected.llm.on("extract_reflections", reflections())
    chain = [worker_formation.extract_facts, worker_formation.embed_facts, worker_formation.decide_facts,
             worker_formation.extract_reflections, worker_formation.consolidate, worker_formation.finish]
    for task in chain:
        task.apply(kwargs={"run_id": run_id}).get()
    assert [name for name, _ in sent] == [names.TASK_EMBED_FACTS, names.TASK_DECIDE_FACTS,
                                          names.TASK_EXTRACT_REFLECTIONS, names.TASK_CONSOLIDATE, names.TASK_FINISH]
    assert injected.store.runs.get_run(run_id).status == "done"


def test_a_dead_run_hands_nothing_on(injected, sent):
    run_id = _run(injected, Fault("permanent"))
    assert worker_formation.extract_facts.apply(kwargs={"run_id": run_id}).get() is None
    assert sent == [] and injected.store.runs.get_run(run_id).status == "dead"


def test_a_scope_whose_lease_stays_busy_is_skipped_and_its_buffer_kept(injected, attempt, sent):
    env = injected
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(user=["a likes x", "a likes y", "a likes z", "a likes w"]))
    env.llm.on("consolidate", merge_all)
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    assert cs.consolidate(run_id, env).output["due"] == ["user:u-1"]
    assert env.store.leases.acquire_lease("consolidate:agent-1:user:u-1", "someone-else", env.clock.now(), 300)
    with pytest.raises(Retry):
        attempt(run_id, 0, "consolidate_scope:0", lambda d: cs.consolidate_scope(run_id, 0, d))
    sent.clear()  # the retry
    result = consolidate_scope.apply(kwargs={"run_id": run_id, "index": 0},
                                     retries=env.settings.task_max_retries).get()
    assert result["status"] == "skipped"
    assert cs.scopes_done(env, run_id)
    assert sent == [(names.TASK_FINISH, {"run_id": run_id})]
    assert len(env.store.reflections.unabsorbed_reflections("agent-1", "user:u-1")) == 4
    assert env.store.runs.get_run(run_id).status not in ("failed", "dead")


def test_a_scope_whose_model_stays_down_fails_the_run_with_the_retries_spent_and_keeps_its_buffer(injected, sent):
    env = injected
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(user=["a likes x", "a likes y", "a likes z", "a likes w"]))
    env.llm.on("consolidate", Fault("server_error"))
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    assert cs.consolidate(run_id, env).output["due"] == ["user:u-1"]
    retries = env.settings.task_max_retries
    assert consolidate_scope.apply(kwargs={"run_id": run_id, "index": 0}, retries=retries).get() is None
    run = env.store.runs.get_run(run_id)
    assert run.status == "failed" and sent == []
    assert run.error.startswith(f"consolidate_scope:0: TransientError after {retries} retries")
    assert len(env.store.reflections.unabsorbed_reflections("agent-1", "user:u-1")) == 4


def test_consolidate_fans_out_per_due_scope_and_the_last_scope_sends_finish(injected, sent):
    env = injected
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(user=[f"Alice likes {x}" for x in "abcd"],
                                                  session=[f"Alice asked {x}" for x in "abcd"]))
    env.llm.on("consolidate", merge_all)
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    worker_formation.consolidate.apply(kwargs={"run_id": run_id}).get()
    fanned = [kw for name, kw in sent if name == names.TASK_CONSOLIDATE_SCOPE]
    assert [(kw["index"], kw["scope_key"]) for kw in fanned] == [(0, "user:u-1"), (1, f"session:{env.store.runs.get_run(run_id).session_id}")]
    sent.clear()
    consolidate_scope.apply(kwargs=fanned[1]).get()
    assert sent == []  # one scope still pending: no finish yet
    consolidate_scope.apply(kwargs=fanned[0]).get()
    assert sent == [(names.TASK_FINISH, {"run_id": run_id})]
