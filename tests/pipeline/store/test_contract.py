"""The store contract, part 1: ingest, sessions, claims and formation runs (design §3-§5, §7).

Runs unchanged against every adapter (the ``store`` fixture in conftest). The memory side
(facts, reflections, blobs, caches, erasure) is in ``test_contract_memory.py``.
"""

from __future__ import annotations

import pytest

from pipeline.trigger import ClaimRule
from schemas.documents import RejectedEvent, StageRecord
from testkit.documents import T0, at, message, run

ANY = ClaimRule(min_messages=1)


def ingest(store, *numbers, **kwargs):
    return [store.ingest.ingest_message(message(n, **kwargs), at(n)) for n in numbers]


# ---------------------------------------------------------------------- ingest -------------
def test_accepted_messages_get_consecutive_seq_and_move_the_counters(store):
    outcomes = ingest(store, 1, 2, 3, tokens=2.5)
    assert [o.status for o in outcomes] == ["accepted"] * 3
    assert [o.seq for o in outcomes] == [1, 2, 3]
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.messages_since, session.tokens_since) == (3, 3, 7.5)
    assert session.last_activity_at == at(3)
    assert session.agent_id == "a1" and session.users == ["u1"]
    assert store.ingest.count_messages("s1") == 3


def test_duplicate_event_id_is_counted_and_changes_nothing_else(store):
    ingest(store, 1)
    again = store.ingest.ingest_message(message(2, event_id="s1-e1"), at(5))
    assert again.status == "duplicate" and again.seq is None
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.messages_since, session.duplicates) == (1, 1, 1)
    assert session.last_activity_at == at(1)
    assert store.ingest.count_messages("s1") == 1


def test_duplicate_session_and_message_id_is_a_duplicate_under_a_new_event_id(store):
    ingest(store, 1)
    again = store.ingest.ingest_message(message(1, event_id="other-event"), at(2))
    assert again.status == "duplicate"
    assert store.ingest.get_session("s1").duplicates == 1
    assert store.ingest.count_messages("s1") == 1


def test_same_message_id_in_another_session_is_accepted(store):
    ingest(store, 1)
    other = store.ingest.ingest_message(message(1, session="s2"), at(1))
    assert other.status == "accepted" and other.seq == 1


def test_out_of_order_created_at_keeps_arrival_seq_and_reads_in_created_order(store):
    late = store.ingest.ingest_message(message(1, created=at(100)), at(1))
    early = store.ingest.ingest_message(message(2, created=at(10)), at(2))
    assert (late.seq, early.seq) == (1, 2)
    assert [m.message_id for m in store.ingest.get_messages("s1", 1, 2)] == ["m2", "m1"]
    assert [m.seq for m in store.ingest.get_messages("s1", 1, 2)] == [2, 1]


def test_get_messages_returns_only_the_seq_range(store):
    ingest(store, 1, 2, 3, 4)
    assert [m.seq for m in store.ingest.get_messages("s1", 2, 3)] == [2, 3]


def test_session_keeps_every_human_the_max_tier_and_preview(store):
    store.ingest.ingest_message(message(1, user="u1", users=["u1"], tier=0), at(1))
    store.ingest.ingest_message(message(2, user="u2", users=["u1", "u2"], tier=2), at(2))
    store.ingest.ingest_message(message(3, role="assistant", users=[], tier=0, preview=True), at(3))
    session = store.ingest.get_session("s1")
    assert sorted(session.users) == ["u1", "u2"]
    assert session.max_tier == 2 and session.preview is True


def test_last_activity_never_moves_back(store):
    store.ingest.ingest_message(message(1), at(50))
    store.ingest.ingest_message(message(2), at(10))
    assert store.ingest.get_session("s1").last_activity_at == at(50)


def test_rejections_are_kept_with_raw_payload_newest_first(store):
    for i in range(3):
        store.ingest.record_rejection(RejectedEvent(
            rejection_id=f"x{i}", raw='{"bad": %d}' % i, errors=[{"field": "event_id", "reason": "missing"}],
            received_at=at(i),
        ))
    listed = store.ingest.list_rejections(limit=2)
    assert [r.rejection_id for r in listed] == ["x2", "x1"]
    assert listed[0].raw == '{"bad": 2}' and listed[0].errors[0]["field"] == "event_id"


def test_deleted_rejections_are_gone_and_the_others_stay(store):
    for i in range(3):
        store.ingest.record_rejection(RejectedEvent(rejection_id=f"x{i}", raw="{}", errors=[], received_at=at(i)))
    assert store.ingest.delete_rejections(["x0", "x2", "unknown"]) == 2
    assert [r.rejection_id for r in store.ingest.list_rejections()] == ["x1"]
    assert store.ingest.delete_rejections([]) == 0


def test_unknown_session_reads_as_none(store):
    assert store.ingest.get_session("nope") is None
    assert store.ingest.mark_session_ended("nope", T0) is None
    assert store.ingest.count_messages("nope") == 0


def test_mark_session_ended_keeps_the_first_end_time(store):
    ingest(store, 1)
    assert store.ingest.mark_session_ended("s1", at(10)).ended_at == at(10)
    assert store.ingest.mark_session_ended("s1", at(20)).ended_at == at(10)
    assert store.ingest.get_session("s1").ended_history == [at(10)]


def test_a_message_written_after_the_end_reopens_the_session_and_the_end_stays_in_history(store):
    ingest(store, 1)
    store.ingest.mark_session_ended("s1", at(10))
    late = store.ingest.ingest_message(message(2, created=at(5)), at(11))  # written before the end
    assert late.session.ended_at == at(10)
    resumed = store.ingest.ingest_message(message(3, created=at(20)), at(20))
    assert resumed.session.ended_at is None and resumed.session.ended_history == [at(10)]
    assert store.ingest.get_session("s1").ended_at is None
    again = store.ingest.mark_session_ended("s1", at(30))
    assert again.ended_at == at(30) and again.ended_history == [at(10), at(30)]


# ---------------------------------------------------------------------- session owner ------
OWNED = "session s1 belongs to another agent"


def test_message_into_another_agents_session_is_rejected_and_changes_nothing(store):
    ingest(store, 1, 2)
    intruder = store.ingest.ingest_message(message(3, agent="a2"), at(3))
    assert (intruder.status, intruder.seq, intruder.session) == ("rejected", None, None)
    assert intruder.reason == OWNED and "a1" not in intruder.reason
    session = store.ingest.get_session("s1")
    assert (session.agent_id, session.last_seq, session.messages_since, session.duplicates) == ("a1", 2, 2, 0)
    assert store.ingest.count_messages("s1") == 2
    assert store.ingest.ingest_message(message(3), at(4)).seq == 3  # the owner's own message 3 is still new


def test_another_agent_repeating_a_stored_message_key_is_rejected_not_a_duplicate(store):
    ingest(store, 1)
    again = store.ingest.ingest_message(message(1, agent="a2", event_id="a2-event"), at(2))
    assert again.status == "rejected"
    assert store.ingest.get_session("s1").duplicates == 0


def test_batch_rejects_only_the_messages_into_another_agents_session(store):
    outcomes = store.ingest.ingest_messages(
        [message(1), message(2, agent="a2"), message(1, session="s2", agent="a2"), message(3)], at(5))
    assert [(o.status, o.seq) for o in outcomes] == [("accepted", 1), ("rejected", None), ("accepted", 1), ("accepted", 2)]
    assert outcomes[1].reason == OWNED
    assert (store.ingest.get_session("s1").agent_id, store.ingest.get_session("s1").last_seq) == ("a1", 2)
    assert store.ingest.get_session("s2").agent_id == "a2"


def test_another_agent_cannot_end_a_session(store):
    from pipeline.errors import InvalidInput

    ingest(store, 1)
    with pytest.raises(InvalidInput) as refused:
        store.ingest.mark_session_ended("s1", at(10), agent_id="a2")
    assert (refused.value.field, refused.value.reason) == ("session_id", OWNED)
    assert store.ingest.get_session("s1").ended_at is None
    assert store.ingest.mark_session_ended("s1", at(11), agent_id="a1").ended_at == at(11)


def test_declared_users_create_the_session_for_their_agent_with_no_message(store):
    from pipeline.errors import InvalidInput

    declared = store.ingest.declare_session_users("s1", "a1", ["u1", "u2", "u1"])
    assert (declared.agent_id, declared.users, declared.last_seq) == ("a1", ["u1", "u2"], 0)
    assert store.ingest.get_session("s1").users == ["u1", "u2"]
    assert store.ingest.find_cold_sessions(at(10_000), 0, 10) == []  # nothing to form yet
    assert store.ingest.ingest_message(message(1, agent="a2"), at(1)).status == "rejected"
    with pytest.raises(InvalidInput) as refused:
        store.ingest.declare_session_users("s1", "a2", ["u9"])
    assert (refused.value.field, refused.value.reason) == ("session_id", OWNED)
    assert store.ingest.get_session("s1").users == ["u1", "u2"]


def test_declared_users_and_message_users_merge_into_one_set_in_either_order(store):
    store.ingest.declare_session_users("s1", "a1", ["u1", "u2"])
    store.ingest.ingest_message(message(1, user="u3", users=["u3", "u1"]), at(1))
    assert store.ingest.get_session("s1").users == ["u1", "u2", "u3"]
    store.ingest.ingest_message(message(1, session="s2", user="u1"), at(1))
    assert store.ingest.declare_session_users("s2", "a1", ["u2", "u1"]).users == ["u1", "u2"]
    assert store.ingest.declare_session_users("s2", "a1", []).users == ["u1", "u2"]
    claimed = store.runs.try_claim("s1", ANY, run("r1"), at(2), 60)
    assert claimed.user_ids == ["u1", "u2", "u3"] and claimed.group_chat


def test_another_agent_cannot_claim_a_session(store):
    ingest(store, 1)
    assert store.runs.try_claim("s1", ANY, run("r1", agent="a2"), at(10), 60) is None
    assert store.ingest.get_session("s1").claimed_through == 0
    assert store.runs.try_claim("s1", ANY, run("r2"), at(11), 60) is not None


# ---------------------------------------------------------------------- claims -------------
@pytest.mark.parametrize(
    ("rule", "count", "tokens", "claimed"),
    [
        (ClaimRule(min_messages=4, message_interval=5, token_interval=1000), 5, 1.0, True),
        (ClaimRule(min_messages=4, message_interval=5, token_interval=1000), 4, 1.0, False),
        (ClaimRule(min_messages=4, message_interval=45, token_interval=100), 4, 30.0, True),
        (ClaimRule(min_messages=4, message_interval=45, token_interval=100), 3, 50.0, False),
        (ClaimRule(min_messages=1), 1, 1.0, True),
        (ClaimRule(min_messages=2), 1, 1.0, False),
        (ClaimRule(min_messages=4, message_interval=None, token_interval=100), 4, 30.0, True),
        (ClaimRule(min_messages=4, message_interval=None, token_interval=200), 4, 30.0, False),
    ],
)
def test_claim_rule_thresholds(store, rule, count, tokens, claimed):
    ingest(store, *range(1, count + 1), tokens=tokens)
    assert (store.runs.try_claim("s1", rule, run(), at(100), 60) is not None) is claimed


@pytest.mark.parametrize(("idle_before", "claimed"), [(at(9), False), (at(10), True), (at(99), True)])
def test_cold_rule_needs_the_session_idle_since(store, idle_before, claimed):
    ingest(store, 7, 8, 9, 10)
    rule = ClaimRule(min_messages=4, idle_before=idle_before)
    assert (store.runs.try_claim("s1", rule, run(), at(100), 60) is not None) is claimed


def test_claim_takes_the_unclaimed_range_and_fills_the_run(store):
    store.ingest.ingest_message(message(1, user="u1", users=["u1", "u2"], tier=1), at(1))
    ingest(store, 2, 3)
    claimed = store.runs.try_claim("s1", ANY, run(), at(10), 60)
    assert (claimed.seq_from, claimed.seq_to, claimed.status) == (1, 3, "claimed")
    assert claimed.lease_expires_at == at(70)
    assert sorted(claimed.user_ids) == ["u1", "u2"] and claimed.group_chat is True and claimed.tier == 1
    assert store.runs.get_run("r1") == claimed
    session = store.ingest.get_session("s1")
    assert (session.claimed_through, session.messages_since, session.tokens_since) == (3, 0, 0.0)
    assert session.active_run_id == "r1" and session.lease_expires_at == at(70)


def test_second_claim_while_the_first_is_live_gets_none(store):
    ingest(store, 1, 2)
    assert store.runs.try_claim("s1", ANY, run("r1"), at(10), 60) is not None
    ingest(store, 3)
    assert store.runs.try_claim("s1", ANY, run("r2"), at(11), 60) is None
    assert store.runs.get_run("r2") is None


def test_expired_lease_of_a_running_run_still_blocks_new_claims(store):
    ingest(store, 1, 2)
    store.runs.try_claim("s1", ANY, run("r1"), at(10), 60)
    store.runs.start_stage("r1", "extract_facts", at(11))
    ingest(store, 3)
    assert store.runs.try_claim("s1", ANY, run("r2"), at(1000), 60) is None
    assert [r.run_id for r in store.runs.find_stale_runs(at(1000), 10)] == ["r1"]


def test_next_claim_after_finish_starts_after_the_previous_range(store):
    ingest(store, 1, 2)
    store.runs.try_claim("s1", ANY, run("r1"), at(10), 60)
    ingest(store, 3, 4, 5)
    store.runs.finish_run("r1", at(20), {}, [])
    second = store.runs.try_claim("s1", ANY, run("r2"), at(21), 60)
    assert (second.seq_from, second.seq_to) == (3, 5)


def test_claim_with_nothing_unclaimed_gets_none(store):
    ingest(store, 1)
    store.runs.try_claim("s1", ANY, run("r1"), at(10), 60)
    store.runs.finish_run("r1", at(11), {}, [])
    assert store.runs.try_claim("s1", ClaimRule(min_messages=0), run("r2"), at(12), 60) is None
    assert store.runs.try_claim("unknown", ANY, run("r3"), at(12), 60) is None


def test_find_cold_sessions_lists_idle_unclaimed_sessions_only(store):
    ingest(store, 1, 2, 3, 4, session="idle")
    ingest(store, 1, 2, 3, 4, session="busy")
    store.ingest.ingest_message(message(9, session="busy"), at(500))
    ingest(store, 1, session="small")
    ingest(store, 1, 2, 3, 4, session="claimed")
    store.runs.try_claim("claimed", ANY, run("rc", session="claimed"), at(20), 60)
    assert store.ingest.find_cold_sessions(at(100), 4, 10) == ["idle"]


# ---------------------------------------------------------------------- runs & stages ------
@pytest.fixture
def claimed(store):
    ingest(store, 1, 2, 3)
    return store.runs.try_claim("s1", ANY, run("r1"), at(10), 60)


def test_start_stage_counts_attempts_until_done_then_returns_it_unchanged(store, claimed):
    first = store.runs.start_stage("r1", "extract_facts", at(11))
    assert (first.status, first.attempts, first.started_at) == ("running", 1, at(11))
    assert store.runs.get_run("r1").status == "running"
    assert store.runs.start_stage("r1", "extract_facts", at(12)).attempts == 2
    record = StageRecord(output={"facts": ["x"]}, finished_at=at(13))
    assert store.runs.complete_stage("r1", "extract_facts", record) is True
    again = store.runs.start_stage("r1", "extract_facts", at(14))
    assert (again.status, again.output, again.attempts) == ("done", {"facts": ["x"]}, 2)


def test_complete_stage_applies_once(store, claimed):
    store.runs.start_stage("r1", "embed_facts", at(11))
    assert store.runs.complete_stage("r1", "embed_facts", StageRecord(output={"n": 1})) is True
    assert store.runs.complete_stage("r1", "embed_facts", StageRecord(output={"n": 2})) is False
    assert store.runs.get_run("r1").stages["embed_facts"].output == {"n": 1}


def test_fail_stage_records_the_error(store, claimed):
    store.runs.start_stage("r1", "decide_facts", at(11))
    store.runs.fail_stage("r1", "decide_facts", "boom", at(12))
    stage = store.runs.get_run("r1").stages["decide_facts"]
    assert (stage.status, stage.error) == ("failed", "boom")


def test_update_run_fields_sets_top_level_fields(store, claimed):
    store.runs.update_run_fields("r1", scopes_enabled=["agent", "user"], models={"fast": "m"}, totals={"facts": 2})
    stored = store.runs.get_run("r1")
    assert stored.scopes_enabled == ["agent", "user"] and stored.models == {"fast": "m"}
    assert stored.totals == {"facts": 2}


def test_renew_lease_extends_run_and_session_while_active(store, claimed):
    assert store.runs.renew_run_lease("r1", at(30), 60) is True
    assert store.runs.get_run("r1").lease_expires_at == at(90)
    assert store.ingest.get_session("s1").lease_expires_at == at(90)
    store.runs.finish_run("r1", at(40), {}, [])
    assert store.runs.renew_run_lease("r1", at(50), 60) is False


def test_finish_run_advances_watermark_releases_claim_bumps_versions_once(store, claimed):
    assert store.runs.finish_run("r1", at(20), {"facts": 3}, ["agent", "user:u1"]) is True
    done = store.runs.get_run("r1")
    assert (done.status, done.finished_at, done.totals) == ("done", at(20), {"facts": 3})
    session = store.ingest.get_session("s1")
    assert (session.watermark, session.active_run_id, session.lease_expires_at) == (3, None, None)
    assert store.leases.get_scope_versions("a1", ["agent", "user:u1", "session:s1"]) == {
        "agent": 1, "user:u1": 1, "session:s1": 0}
    assert store.runs.finish_run("r1", at(21), {"facts": 9}, ["agent"]) is False
    assert store.runs.get_run("r1").totals == {"facts": 3}
    assert store.leases.get_scope_versions("a1", ["agent"]) == {"agent": 1}


def test_watermark_never_moves_back(store, claimed):
    ingest(store, 4, 5)
    store.runs.fail_run("r1", "later", at(11), dead=False)
    second = store.runs.try_claim("s1", ANY, run("r2"), at(12), 60)
    store.runs.finish_run("r2", at(13), {}, [])
    assert store.ingest.get_session("s1").watermark == second.seq_to == 5
    store.runs.reopen_run("r1", at(14), 60)
    store.runs.finish_run("r1", at(15), {}, [])
    assert store.ingest.get_session("s1").watermark == 5


@pytest.mark.parametrize(("dead", "status", "stale"), [(True, "dead", []), (False, "failed", ["r1"])])
def test_fail_run_releases_the_claim_and_keeps_the_messages(store, claimed, dead, status, stale):
    store.runs.fail_run("r1", "auth refused", at(11), dead=dead)
    failed = store.runs.get_run("r1")
    assert (failed.status, failed.error) == (status, "auth refused")
    session = store.ingest.get_session("s1")
    assert session.active_run_id is None and session.watermark == 0 and session.claimed_through == 3
    assert store.ingest.count_messages("s1") == 3
    assert [r.run_id for r in store.runs.find_stale_runs(at(11), 10)] == stale
    # the failed range is never claimed again by a trigger; only new messages are
    assert store.runs.try_claim("s1", ANY, run("r2"), at(12), 60) is None
    ingest(store, 4)
    assert store.runs.try_claim("s1", ANY, run("r3"), at(13), 60).seq_from == 4


def test_fail_run_does_not_touch_a_done_run(store, claimed):
    store.runs.finish_run("r1", at(11), {}, [])
    store.runs.fail_run("r1", "late failure", at(12), dead=True)
    assert store.runs.get_run("r1").status == "done"


@pytest.mark.parametrize("reset", [False, True])
def test_reopen_takes_over_a_failed_run(store, claimed, reset):
    store.runs.fail_run("r1", "timeout", at(11), dead=False)
    reopened = store.runs.reopen_run("r1", at(20), 60, reset_attempts=reset)
    assert (reopened.status, reopened.attempts, reopened.lease_expires_at) == ("claimed", 1 if reset else 2, at(80))
    assert (reopened.seq_from, reopened.seq_to) == (1, 3)
    session = store.ingest.get_session("s1")
    assert (session.active_run_id, session.lease_expires_at) == ("r1", at(80))


def test_reopen_takes_over_an_expired_lease_but_not_a_live_one(store, claimed):
    store.runs.start_stage("r1", "extract_facts", at(11))
    assert store.runs.reopen_run("r1", at(30), 60) is None
    assert store.runs.reopen_run("r1", at(100), 60).attempts == 2
    assert store.runs.find_stale_runs(at(100), 10) == []


def test_reopen_refuses_a_done_run_and_a_session_held_by_another_live_run(store, claimed):
    store.runs.fail_run("r1", "x", at(11), dead=True)
    ingest(store, 4)
    store.runs.try_claim("s1", ANY, run("r2"), at(12), 60)
    assert store.runs.reopen_run("r1", at(13), 60) is None
    assert store.runs.get_run("r1").status == "dead"
    store.runs.finish_run("r2", at(14), {}, [])
    assert store.runs.reopen_run("r2", at(15), 60) is None
    assert store.runs.reopen_run("r1", at(16), 60).status == "claimed"
    assert store.runs.reopen_run("missing", at(16), 60) is None


def test_list_runs_filters_and_orders_newest_first(store):
    ingest(store, 1, session="s1")
    ingest(store, 1, session="s2", agent="a2")
    store.runs.try_claim("s1", ANY, run("r1", created=at(1)), at(1), 60)
    store.runs.try_claim("s2", ANY, run("r2", session="s2", agent="a2", created=at(2)), at(2), 60)
    store.runs.finish_run("r1", at(3), {}, [])
    assert [r.run_id for r in store.runs.list_runs()] == ["r2", "r1"]
    assert [r.run_id for r in store.runs.list_runs(status="done")] == ["r1"]
    assert [r.run_id for r in store.runs.list_runs(agent_id="a2")] == ["r2"]
    assert [r.run_id for r in store.runs.list_runs(session_id="s1")] == ["r1"]
    assert [r.run_id for r in store.runs.list_runs(limit=1)] == ["r2"]


def test_free_form_outputs_and_totals_keep_keys_that_hold_dots_and_dollars(store, claimed):
    odd = "user:first.last$1"
    store.runs.start_stage("r1", "consolidate_scope:0", at(11))
    store.runs.complete_stage("r1", "consolidate_scope:0", StageRecord(output={"merged": {odd: 2}, "scope_key": odd}))
    store.runs.update_run_fields("r1", models={"gpt-5.1": "tier.1"})
    store.runs.finish_run("r1", at(12), {"consolidated": {odd: "merged"}}, [odd])
    done = store.runs.get_run("r1")
    assert done.stages["consolidate_scope:0"].output == {"merged": {odd: 2}, "scope_key": odd}
    assert done.totals == {"consolidated": {odd: "merged"}} and done.models == {"gpt-5.1": "tier.1"}
    assert store.leases.get_scope_versions("a1", [odd]) == {odd: 1}


def test_create_indexes_is_idempotent_and_names_the_indexes(store):
    first = store.create_indexes()
    assert store.create_indexes() == first
    assert any("hash" in name for name in first)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.runs.update_run_fields("missing", totals={}),
        lambda s: s.runs.start_stage("missing", "extract_facts", T0),
        lambda s: s.runs.complete_stage("missing", "extract_facts", StageRecord()),
        lambda s: s.runs.fail_stage("missing", "extract_facts", "x", T0),
        lambda s: s.runs.finish_run("missing", T0, {}, []),
        lambda s: s.runs.fail_run("missing", "x", T0, dead=True),
    ],
)
def test_effects_on_a_missing_run_raise_key_error(store, call):
    with pytest.raises(KeyError):
        call(store)


def test_a_missing_run_has_no_lease_to_renew_and_nothing_to_reopen(store):
    assert store.runs.renew_run_lease("missing", T0, 60) is False
    assert store.runs.reopen_run("missing", T0, 60) is None
    assert store.runs.get_run("missing") is None
