"""Spend caps in formation (design §13): over a hard cap a run's stage waits (sent again with a
countdown, its lease kept, never dead for waiting) and resumes when the window rolls or the cap
is raised, forming its facts once; at a soft cap the premium stages use the fast model; each
cap's 80% and 100% are announced once per window."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from celery.exceptions import Retry
from hypothesis import HealthCheck, given, settings, strategies as st

from pipeline import names
from pipeline.errors import SpendDeferred
from pipeline.formation import consolidate_stages, finish as finish_mod, stages
from pipeline.formation.runner import guard_stage
from pipeline.sweep import retry_stale_runs
from schemas.caps import CapsSetting, SpendCaps, WindowCaps
from schemas.webhooks import WebhookSubscription
from workers import formation as worker_formation
from workers.formation import guarded

from testkit.formation import ALICE_CHAT, decisions, facts, make_env, merge_all, reflections

# a dollar a token: one extraction is well past a cap of a few dollars
PRICES = {"gpt-6-luna": {"input": 1e6, "output": 1e6}, "gpt-6.1-sol": {"input": 1e6, "output": 1e6}}


def _capped(env, caps: dict, **settings):
    env.settings = env.settings.model_copy(update={
        "llm_provider": "openai", "prices": PRICES, "spend_caps": CapsSetting.model_validate(caps), **settings})


def _script(env, text: str):
    env.llm.on("extract_facts", facts(("user", text)), times=1)
    env.llm.on("decide_facts", decisions((0, "ADD")))    # unrelated to what is stored: added
    env.llm.on("extract_reflections", reflections())
    env.llm.on("consolidate", merge_all)


def _deliver(delivery, run_id, retries=0, stage="extract_facts"):
    task = getattr(worker_formation, stage)
    with delivery(task, retries, run_id=run_id):
        return guarded(task, run_id, stage, lambda d: getattr(stages, stage)(run_id, d))


def test_a_run_over_its_hard_cap_waits_keeps_its_events_and_forms_them_once_when_allowed(
        injected, delivery, sent):
    env = injected
    _capped(env, {})
    _script(env, "Alice likes tea")
    env.whole_chain(env.new_run(ALICE_CHAT))            # spends far past 5 USD today
    calls = len(env.llm.calls)
    _capped(env, {"agent": {"day": {"hard_usd": 5}}})

    _script(env, "Alice lives in Lisbon")
    run_id = env.new_run([("user", "u-1", "I moved to Lisbon last spring.")])
    for retries in (0, env.settings.llm_rate_max_requeues + 5):   # waiting is not failing: no bound
        sent.clear()
        with pytest.raises(Retry) as waited:
            _deliver(delivery, run_id, retries)
        assert 1 <= waited.value.when <= env.settings.claim_lease_s / 2
        assert sent == [(names.TASK_EXTRACT_FACTS, {"run_id": run_id})]
        env.clock.advance(seconds=waited.value.when)
        # the lease was renewed by the stage's start: the sweep leaves the waiting run alone
        assert retry_stale_runs(env.store.runs, env.settings, env.clock.now()).run_ids == []
    run = env.store.runs.get_run(run_id)
    assert run.status == "running" and "hard spend cap" in run.stages["extract_facts"].error
    assert len(env.llm.calls) == calls                   # nothing asked of the model while over
    assert [m.content for m in env.store.ingest.get_messages(run.session_id, 0, 100)] == ["I moved to Lisbon last spring."]

    env.clock.advance(days=1)                            # the window rolls: the run goes on
    assert _deliver(delivery, run_id, retries=1) is not None
    with pytest.raises(Retry):                           # until its own extraction passes the cap again
        _deliver(delivery, run_id, stage="embed_facts")
    env.store.caps.put_spend_caps("agent-1", SpendCaps(day=WindowCaps(hard_usd=1e6)), env.clock.now())
    env.whole_chain(run_id)
    texts = Counter(f.content for f in env.all_facts())
    assert texts == {"Alice likes tea": 1, "Alice lives in Lisbon": 1}
    assert env.store.runs.get_run(run_id).status == "done"


def test_raising_the_cap_lets_a_waiting_run_go_on(injected, delivery, sent):
    env = injected
    _capped(env, {"agent": {"month": {"hard_usd": 0}}})
    _script(env, "Alice likes tea")
    run_id = env.new_run(ALICE_CHAT)
    with pytest.raises(Retry):
        _deliver(delivery, run_id)
    env.store.caps.put_spend_caps("agent-1", SpendCaps(month=WindowCaps(hard_usd=1e6)), env.clock.now())
    assert _deliver(delivery, run_id, retries=1) is not None
    env.whole_chain(run_id)
    assert [f.content for f in env.all_facts()] == ["Alice likes tea"]


@pytest.mark.parametrize("fast_tier, model", [(True, "gpt-6-luna"), (False, "gpt-6.1-sol")])
def test_at_a_soft_cap_reflections_use_the_fast_model_and_the_run_says_why(injected, fast_tier, model):
    env = injected
    _capped(env, {"agent": {"day": {"soft_usd": 3}}}, spend_soft_cap_fast_tier=fast_tier)
    _script(env, "Alice likes tea")
    run_id = env.new_run(ALICE_CHAT, tier=1)             # a premium user: the tier model is sol
    env.through_reflections(run_id)                      # extraction alone passes the soft cap
    asked = {c.operation: c.model for c in env.llm.calls}
    assert asked["extract_facts"] == "gpt-6-luna" and asked["extract_reflections"] == model
    models = env.store.runs.get_run(run_id).models
    assert models.get("extract_reflections") == ("gpt-6-luna" if fast_tier else None)
    assert ("soft spend cap" in models.get("extract_reflections_reason", "")) is fast_tier


def test_each_cap_level_is_announced_once_per_window(injected):
    env = injected
    env.store.webhooks.put_subscription(WebhookSubscription(
        subscription_id="sub-1", agent_id="agent-1", url="http://127.0.0.1:9/hook", events=["cap.reached"],
        secrets=["whsec_" + "A" * 44], created_at=env.clock.now(), updated_at=env.clock.now()))
    _capped(env, {"global": {"day": {"soft_usd": 1e6, "hard_usd": 1e6}}, "agent": {"day": {"soft_usd": 3}}})
    for text in ("Alice likes tea", "Alice likes coffee"):
        _script(env, text)
        env.through_reflections(env.new_run(ALICE_CHAT))
    events = [d.event.data for d in env.store.webhooks.list_deliveries(agent_id="agent-1")]
    assert sorted((e["scope"], e["window"], e["kind"], e["level"]) for e in events) == [
        ("agent", "day", "soft", 80), ("agent", "day", "soft", 100)]
    assert all(e["cap_usd"] == 3 and e["spend_usd"] >= 2.4 for e in events)
    audited = env.store.access.list_audit(action="cap.reached")
    assert sorted(e.counts["level"] for e in audited) == [80, 100] and all(e.subject == "agent:day" for e in audited)

    env.clock.advance(days=1)                            # a new window: announced again
    _script(env, "Alice likes juice")
    env.through_reflections(env.new_run(ALICE_CHAT))
    assert len(env.store.webhooks.list_deliveries(agent_id="agent-1")) == 4


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.booleans(), min_size=1, max_size=10), runs=st.integers(1, 3))
def test_however_a_hard_cap_comes_and_goes_between_stages_each_fact_forms_once(tmp_path_factory, flips, runs):
    env = make_env(tmp_path_factory.mktemp("caps"))
    _capped(env, {})
    texts = [f"Alice keeps fact number {n}" for n in range(runs)]
    run_ids = []
    for text in texts:
        _script(env, text)
        run_ids.append(env.new_run(ALICE_CHAT))
    chain = [stages.extract_facts, stages.embed_facts, stages.decide_facts, stages.extract_reflections,
             consolidate_stages.consolidate]
    at = dict.fromkeys(run_ids, 0)
    for capped in flips:
        env.store.caps.put_spend_caps("agent-1", SpendCaps(day=WindowCaps(hard_usd=0)) if capped else None, env.clock.now())
        for run_id in run_ids:
            if at[run_id] == len(chain):
                continue
            stage, calls = chain[at[run_id]], len(env.llm.calls)
            try:
                guard_stage(env, run_id, stage.__name__, lambda d: stage(run_id, d))
                at[run_id] += 1
            except SpendDeferred:
                assert capped and len(env.llm.calls) == calls    # waited without asking the model
            else:
                assert not capped
            env.clock.advance(minutes=5)
    env.store.caps.put_spend_caps("agent-1", None, env.clock.now())
    for run_id in run_ids:
        for stage in chain[at[run_id]:]:
            stage(run_id, env)
        for index in range(len(env.store.runs.get_run(run_id).stages["consolidate"].output["due"])):
            consolidate_stages.consolidate_scope(run_id, index, env)
        finish_mod.finish(run_id, env)
    assert Counter(f.content for f in env.all_facts()) == dict.fromkeys(texts, 1)
    assert all(env.store.runs.get_run(r).status == "done" for r in run_ids)
    env.store.close()
