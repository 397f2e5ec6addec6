"""A stage renews its leases before every model call, so a lease outlives any number of calls
(each bounded), and a stage whose lease was taken over meanwhile stops before the next paid
call: never two holders (design §11 "Providers", bounded work)."""

from __future__ import annotations

import pytest

from pipeline.errors import LeaseLost
from pipeline.formation import consolidate_stages as cs
from pipeline.formation.consolidation import OverWordLimit
from testkit.formation import ALICE_CHAT, blob_answer, facts, make_env, reflections

LEASE = "consolidate:agent-1:user:u-1"


@pytest.fixture
def due(tmp_path):
    """A run whose user scope is due for consolidation."""
    env = make_env(tmp_path)
    env.llm.on("extract_facts", facts())
    env.llm.on("extract_reflections", reflections(user=[f"Alice likes {x}" for x in ("tea", "jazz", "hiking", "chess")]))
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    assert cs.consolidate(run_id, env).output["due"] == ["user:u-1"]
    yield env, run_id
    env.store.close()


def _over_the_limit():
    return blob_answer(("NOTES", ["word " * 60] * 6))   # 360 words, over the user scope's 300


def test_each_call_of_a_consolidation_renews_the_scope_lease(due):
    env, run_id = due
    held = []

    def answer(request):
        # each call runs under a lease renewed just before it: time spent in the calls before
        # (here a whole lease's worth each) never lets another holder in
        held.append(not env.store.leases.acquire_lease(LEASE, "another-worker", env.clock.now(), 60))
        env.clock.advance(seconds=env.settings.consolidation_lease_s - 1)
        return _over_the_limit()

    env.llm.on("consolidate", answer)
    with pytest.raises(OverWordLimit):   # every answer over the limit: the attempts run out
        cs.consolidate_scope(run_id, 0, env)
    attempts = 1 + env.settings.consolidation_max_length_retries
    assert held == [True] * attempts


def test_a_consolidation_whose_lease_was_taken_stops_before_the_next_call(due):
    env, run_id = due
    calls = []

    def answer(request):
        calls.append(request)
        env.clock.advance(seconds=env.settings.consolidation_lease_s + 1)      # this call outlived the lease
        assert env.store.leases.acquire_lease(LEASE, "another-worker", env.clock.now(), 600)
        return _over_the_limit()                                               # asked again ...

    env.llm.on("consolidate", answer)
    with pytest.raises(LeaseLost):
        cs.consolidate_scope(run_id, 0, env)
    assert len(calls) == 1                                                     # ... but not paid for again
