"""Ingest of producer events (design §3, §4), on the SQLite store and on the Mongo adapter."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from pipeline.clock import FrozenClock
from pipeline.errors import TransientError
from pipeline.ingest import ingest_raw_event, ingest_raw_events
from pipeline.ingest_results import END_DEFERRAL_BASE_S, ConsolidateSession, DeliverAgain, Done, StartRun
from pipeline.store.sqlite import SQLiteStore
from pipeline.store.sqlite.ingest import SQLiteIngest
from pipeline.store.sqlite.runs import SQLiteRuns
from pipeline.sweep import sweep_cold_sessions
from schemas.settings import Settings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SETTINGS = Settings()


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SQLiteStore(str(tmp_path / "memory.db"))
    else:
        from pipeline.store.mongo import MongoStore
        from testkit.mongo_emulation import emulated_database

        s = MongoStore(emulated_database())
        s.create_indexes()
    yield s
    s.close()


@pytest.fixture
def clock():
    return FrozenClock(T0)


def message(n: int, *, session="s1", role="user", content=None, event_id=None, message_id=None,
            created_at=None, sender="u1", **extra) -> dict:
    msg = {
        "message_id": message_id or f"m{n}",
        "role": role,
        "content": content if content is not None else f"message number {n}",
        "created_at": (created_at or T0 + timedelta(seconds=n)).isoformat(),
    }
    if role == "user":
        msg["sender_id"] = sender
    event = {
        "type": "message.added", "schema_version": 1, "event_id": event_id or f"e-{session}-{n}",
        "agent_id": "agent-1", "session_id": session, "message": msg, "session_users": [sender],
    }
    event.update(extra)
    return event


def ended(session="s1", event_id=None, ended_at=None) -> dict:
    event = {"type": "session.ended", "event_id": event_id or f"end-{session}", "agent_id": "agent-1", "session_id": session}
    if ended_at is not None:
        event["ended_at"] = ended_at.isoformat()
    return event


def ingest(raw, store, clock):
    return ingest_raw_event(raw, store, SETTINGS, clock)


def test_valid_message_is_stored_with_sequence_number_and_weighted_tokens(store, clock):
    result = ingest(message(1, content="x" * 90), store, clock)
    assert (result.status, result.seq, result.run) == ("accepted", 1, None)
    [stored] = store.ingest.get_messages("s1", 1, 1)
    assert stored.weighted_tokens == pytest.approx(20.0)
    assert stored.event_id == "e-s1-1" and stored.sender_id == "u1"
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.messages_since, session.users) == (1, 1, ["u1"])


def test_duplicate_event_id_is_counted_and_changes_nothing(store, clock):
    ingest(message(1), store, clock)
    again = ingest(message(1), store, clock)
    assert again.status == "duplicate"
    assert store.ingest.count_messages("s1") == 1
    session = store.ingest.get_session("s1")
    assert (session.duplicates, session.messages_since) == (1, 1)


def test_duplicate_session_and_message_id_under_a_new_event_id_is_a_duplicate(store, clock):
    ingest(message(1), store, clock)
    again = ingest(message(1, event_id="another-event"), store, clock)
    assert again.status == "duplicate"
    assert store.ingest.count_messages("s1") == 1


def test_out_of_order_messages_are_all_accepted_and_read_back_in_created_at_order(store, clock):
    for n in (3, 1, 2):
        assert ingest(message(n), store, clock).status == "accepted"
    stored = store.ingest.get_messages("s1", 1, 3)
    assert [m.message_id for m in stored] == ["m1", "m2", "m3"]
    assert sorted(m.seq for m in stored) == [1, 2, 3]
    assert {m.message_id: m.seq for m in stored}["m3"] == 1  # seq follows arrival


def test_oversize_content_is_rejected_with_its_size_and_not_stored(store, clock):
    raw = message(1, content="é" * (16 * 1024 + 1))  # 2 bytes each: one byte over 32 KiB
    result = ingest(raw, store, clock)
    assert result.status == "rejected"
    assert result.errors[0]["field"] == "message.content"
    assert "32768" in result.errors[0]["reason"]
    assert store.ingest.count_messages("s1") == 0
    [rejected] = store.ingest.list_rejections()
    assert json.loads(rejected.raw) == raw


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_lone_surrogate_is_rejected_naming_the_field_and_recorded_escaped(store, clock, as_bytes):
    raw = message(1, content="hi \udc00 there", event_id="e\udc00")
    result = ingest(json.dumps(raw).encode() if as_bytes else raw, store, clock)
    assert result.status == "rejected" and store.ingest.count_messages("s1") == 0
    assert {e["field"] for e in result.errors} == {"event_id", "message.content"}
    [rejected] = store.ingest.list_rejections()
    assert rejected.event_id == "e\\udc00"  # the escape, which every store's encoder takes
    assert json.loads(rejected.raw.replace("\\\\udc00", "\\udc00") if not as_bytes else rejected.raw) == raw


def test_json_nested_past_the_parsers_limit_is_rejected_and_recorded(store, clock):
    from testkit.hostile import deep_json

    raw = '{"type": "message.added", "message": ' + deep_json() + "}"
    result = ingest(raw, store, clock)
    assert result.status == "rejected" and "nested deeper" in result.errors[0]["reason"]
    [rejected] = store.ingest.list_rejections()
    assert rejected.raw == raw


def test_malformed_json_is_rejected_with_the_raw_text_kept(store, clock):
    raw = '{"type": "message.added", "event_id": "e1",'
    result = ingest(raw, store, clock)
    assert result.status == "rejected"
    [rejected] = store.ingest.list_rejections()
    assert rejected.raw == raw
    assert rejected.errors[0]["field"] == "<event>"
    assert "not JSON" in rejected.errors[0]["reason"]


def test_missing_fields_are_each_named_in_the_rejection(store, clock):
    raw = message(1)
    del raw["session_id"]
    del raw["message"]["content"]
    result = ingest(raw, store, clock)
    assert result.status == "rejected"
    fields = {e["field"] for e in result.errors}
    assert fields == {"session_id", "message.content"}
    [rejected] = store.ingest.list_rejections()
    assert rejected.event_id == "e-s1-1"
    assert rejected.agent_id == "agent-1"
    assert {e["field"] for e in rejected.errors} == fields


def test_unknown_role_is_rejected_naming_the_role_field(store, clock):
    result = ingest(message(1, role="narrator"), store, clock)
    assert result.status == "rejected"
    assert [e["field"] for e in result.errors] == ["message.role"]
    assert store.ingest.get_session("s1") is None


def test_a_batch_with_bad_events_stores_every_good_one(store, clock):
    oversize = message(2, content="x" * (40 * 1024))
    batch = [message(1), "not json at all", oversize, 42, message(3), message(1)]
    out = ingest_raw_events(batch, store, SETTINGS, clock)
    assert [r.status for r in out.results] == ["accepted", "rejected", "rejected", "rejected", "accepted", "duplicate"]
    assert out.error is None and out.next_index == len(batch)
    assert out.counts() == {"accepted": 2, "duplicate": 1, "rejected": 3}
    assert store.ingest.count_messages("s1") == 2
    raws = sorted(r.raw for r in store.ingest.list_rejections())
    assert raws == sorted(["not json at all", json.dumps(oversize, ensure_ascii=False), "42"])


def test_45_messages_claim_one_threshold_run_over_the_whole_range(store, clock):
    runs = []
    for n in range(1, 46):
        result = ingest(message(n, role="assistant", content="ok"), store, clock)
        if result.run:
            runs.append((n, result.run))
    assert len(runs) == 1
    n, run = runs[0]
    assert n == 45
    assert (run.reason, run.status, run.seq_from, run.seq_to) == ("threshold", "claimed", 1, 45)
    assert len(run.run_id) == 32
    assert store.runs.get_run(run.run_id).seq_to == 45
    session = store.ingest.get_session("s1")
    assert (session.claimed_through, session.messages_since, session.active_run_id) == (45, 0, run.run_id)


def test_four_long_user_messages_claim_on_weighted_tokens(store, clock):
    results = [ingest(message(n, content="y" * 1688), store, clock) for n in range(1, 5)]
    assert [r.run is not None for r in results] == [False, False, False, True]
    assert results[-1].run.seq_to == 4


def test_long_assistant_messages_do_not_claim_at_the_same_length(store, clock):
    results = [ingest(message(n, role="assistant", content="y" * 1688), store, clock) for n in range(1, 5)]
    assert all(r.run is None for r in results)


def test_session_end_claims_whatever_is_unformed(store, clock):
    ingest(message(1), store, clock)
    ingest(message(2), store, clock)
    result = ingest(ended(), store, clock)
    assert result.status == "accepted"
    assert (result.run.reason, result.run.seq_from, result.run.seq_to) == ("session_end", 1, 2)
    assert store.ingest.get_session("s1").ended_at == T0
    again = ingest(ended(event_id="end-again"), store, clock)
    assert again.run is None


def test_a_replayed_session_end_that_changes_nothing_counts_as_a_duplicate(store, clock):
    ingest(message(1), store, clock)
    ingest(message(2), store, clock)
    assert ingest(ended(), store, clock).status == "accepted"
    before = store.ingest.get_session("s1")
    replayed = ingest(ended(), store, clock)
    assert (replayed.status, replayed.run) == ("duplicate", None)
    # the first delivery's run is live: it consolidates at its own end, nothing is asked now
    assert replayed.then == Done()
    assert store.ingest.get_session("s1") == before


def test_session_end_with_nothing_unformed_leaves_only_leftovers(store, clock):
    for n in range(1, 46):
        ingest(message(n, role="assistant", content="ok"), store, clock)
    store.runs.finish_run(store.ingest.get_session("s1").active_run_id, T0, {}, [])
    result = ingest(ended(), store, clock)
    assert result.run is None
    assert result.then == ConsolidateSession("agent-1", "s1")
    # a redelivery still asks for the leftovers' consolidation (the first may have stopped before)
    assert ingest(ended(), store, clock).then == ConsolidateSession("agent-1", "s1")


def test_message_written_before_the_end_and_delivered_after_it_is_claimed_by_the_session_end_rule(store, clock):
    ingest(message(1), store, clock)
    first = ingest(ended(ended_at=T0 + timedelta(seconds=10)), store, clock).run
    store.runs.finish_run(first.run_id, T0, {}, [])
    late = ingest(message(2), store, clock)  # written at T0+2s
    assert (late.run.reason, late.run.seq_from, late.run.seq_to) == ("session_end", 2, 2)


def _resume_after_an_end(store, clock) -> list:
    """Two messages, an end at T0+10s that forms them, then five short messages written later."""
    ingest(message(1), store, clock)
    ingest(message(2), store, clock)
    first = ingest(ended(ended_at=T0 + timedelta(seconds=10)), store, clock).run
    store.runs.finish_run(first.run_id, T0, {}, [])
    return [ingest(message(n, content="ok", created_at=T0 + timedelta(seconds=60 + n)), store, clock)
            for n in range(3, 8)]


def test_messages_after_the_end_reopen_the_session_and_wait_for_its_next_end(store, clock):
    resumed = _resume_after_an_end(store, clock)
    assert [r.run for r in resumed] == [None] * 5
    session = store.ingest.get_session("s1")
    assert session.ended_at is None and session.ended_history == [T0 + timedelta(seconds=10)]
    assert sweep_cold_sessions(store, SETTINGS, T0 + timedelta(seconds=120)).run_ids == []  # not cold yet
    second = ingest(ended(event_id="end-2", ended_at=T0 + timedelta(seconds=90)), store, clock).run
    assert (second.reason, second.seq_from, second.seq_to) == ("session_end", 3, 7)
    assert ingest(ended(event_id="end-3", ended_at=T0 + timedelta(seconds=95)), store, clock).run is None
    assert len(store.runs.list_runs(session_id="s1")) == 2
    assert store.ingest.get_session("s1").ended_history == [T0 + timedelta(seconds=10), T0 + timedelta(seconds=90)]


def test_a_resumed_session_left_idle_is_formed_once_by_the_cold_sweep(store, clock):
    _resume_after_an_end(store, clock)
    idle = T0 + timedelta(seconds=67 + SETTINGS.cold_after_s)
    swept = sweep_cold_sessions(store, SETTINGS, idle).run_ids
    assert len(swept) == 1
    run = store.runs.get_run(swept[0])
    assert (run.reason, run.seq_from, run.seq_to) == ("cold", 3, 7)
    assert sweep_cold_sessions(store, SETTINGS, idle).run_ids == []


def test_redelivered_message_claims_when_a_crash_left_a_due_session_unclaimed(store, clock):
    from pipeline.ingest import to_stored_message
    from schemas.events import parse_event

    for n in range(1, 46):  # stored, but the worker died before claiming
        event = parse_event(message(n), max_message_bytes=SETTINGS.max_message_bytes)
        store.ingest.ingest_message(to_stored_message(event, T0), T0)
    redelivered = ingest(message(45), store, clock)
    assert redelivered.status == "duplicate"
    assert (redelivered.run.seq_from, redelivered.run.seq_to) == (1, 45)


def test_no_claim_is_attempted_while_the_rule_does_not_hold(tmp_path, clock):
    class CountingRuns(SQLiteRuns):
        claims = 0

        def try_claim(self, *args, **kwargs):
            CountingRuns.claims += 1
            return super().try_claim(*args, **kwargs)

    class CountingStore(SQLiteStore):
        REPOSITORIES = {**SQLiteStore.REPOSITORIES, "runs": CountingRuns}

    counting = CountingStore(str(tmp_path / "counting.db"))
    for n in range(1, 45):
        ingest(message(n, role="assistant", content="ok"), counting, clock)
    assert CountingRuns.claims == 0
    ingest(message(45, role="assistant", content="ok"), counting, clock)
    assert CountingRuns.claims == 1
    counting.close()


class FlakyIngest(SQLiteIngest):
    """Fails the n-th ingest call (one message or a batch of them) like a store that went
    away, then recovers. ``ingest_message`` goes through ``ingest_messages``."""

    calls = 0
    fail_at = 0

    def ingest_messages(self, messages, now):
        self.calls += 1
        if self.calls == self.fail_at:
            raise TransientError("store unavailable")
        return super().ingest_messages(messages, now)


class FlakyStore(SQLiteStore):
    REPOSITORIES = {**SQLiteStore.REPOSITORIES, "ingest": FlakyIngest}

    def __init__(self, path, fail_at):
        super().__init__(path)
        self.ingest.fail_at = fail_at


def test_transient_store_error_stops_the_batch_where_it_can_resume(tmp_path, clock):
    flaky = FlakyStore(str(tmp_path / "flaky.db"), fail_at=2)
    batch = [message(1), "not json", message(2), message(3)]  # the rejection splits the messages
    out = ingest_raw_events(batch, flaky, SETTINGS, clock)
    assert [r.status for r in out.results] == ["accepted", "rejected"]
    assert isinstance(out.error, TransientError) and out.next_index == 2
    assert flaky.ingest.count_messages("s1") == 1  # the failed call stored none of its messages
    rest = ingest_raw_events(batch[out.next_index:], flaky, SETTINGS, clock)
    assert rest.counts() == {"accepted": 2, "duplicate": 0, "rejected": 0}
    assert flaky.ingest.count_messages("s1") == 3
    assert len(flaky.ingest.list_rejections()) == 1
    flaky.close()


class ClaimFailsOnceRuns(SQLiteRuns):
    """The store goes away once, at the first claim."""

    failed = False

    def try_claim(self, *args, **kwargs):
        if not self.failed:
            self.failed = True
            raise TransientError("store unavailable")
        return super().try_claim(*args, **kwargs)


class ClaimFailsOnceStore(SQLiteStore):
    REPOSITORIES = {**SQLiteStore.REPOSITORIES, "runs": ClaimFailsOnceRuns}


def test_a_claim_that_fails_in_a_batch_resumes_at_its_sessions_last_event_and_claims_then(tmp_path, clock):
    flaky = ClaimFailsOnceStore(str(tmp_path / "flaky.db"))
    batch = [message(n, session="a", role="assistant", content="ok") for n in range(1, 46)]
    batch += [message(1, session="b"), message(2, session="b")]
    out = ingest_raw_events(batch, flaky, SETTINGS, clock)
    assert isinstance(out.error, TransientError) and out.next_index == 44  # session a's last event
    assert [r.status for r in out.results] == ["accepted"] * 44
    assert flaky.ingest.count_messages("a") == 45 and flaky.ingest.count_messages("b") == 2
    rest = ingest_raw_events(batch[out.next_index:], flaky, SETTINGS, clock)
    assert [r.status for r in rest.results] == ["duplicate"] * 3
    [run] = rest.runs
    assert (run.session_id, run.seq_from, run.seq_to) == ("a", 1, 45)
    flaky.close()


def test_a_batch_claims_a_due_session_once_and_reports_the_run_on_its_last_event(store, clock):
    batch = [message(n, session=s, role="assistant", content="ok") for n in range(1, 61) for s in ("a", "b")]
    batch = batch[:-1]  # a: 60 messages, b: 59
    out = ingest_raw_events(batch, store, SETTINGS, clock)
    assert out.counts() == {"accepted": 119, "duplicate": 0, "rejected": 0}
    with_runs = [(i, r.run) for i, r in enumerate(out.results) if r.run is not None]
    assert [(i, run.session_id, run.seq_from, run.seq_to) for i, run in with_runs] == [
        (117, "b", 1, 59), (118, "a", 1, 60),
    ]
    assert store.ingest.get_session("a").active_run_id == with_runs[1][1].run_id


def test_a_session_end_inside_a_batch_sees_the_messages_before_it_and_none_after(store, clock):
    batch = [message(1), message(2), ended(), message(3)]
    out = ingest_raw_events(batch, store, SETTINGS, clock)
    assert [r.status for r in out.results] == ["accepted"] * 4
    end_run = out.results[2].run
    assert (end_run.reason, end_run.seq_from, end_run.seq_to) == ("session_end", 1, 2)
    assert out.results[3].run is None  # the session is held by the end's run
    assert store.ingest.get_session("s1").last_seq == 3


def test_a_batch_gives_the_results_and_state_of_one_by_one_ingest(tmp_path, clock):
    def mixed():
        yield message(1)
        yield message(2, session="s2")
        yield message(1)  # duplicate event id within the batch
        yield message(3, message_id="m2", event_id="fresh")  # duplicate (session, message id)
        yield "{broken"
        yield message(4, content="z" * 1688)
        yield from (message(n, session="s2", role="assistant", content="ok") for n in range(3, 50))
        yield message(5)

    stores = [SQLiteStore(str(tmp_path / f"{name}.db")) for name in ("batch", "single")]
    batched = ingest_raw_events(list(mixed()), stores[0], SETTINGS, clock).results
    single = [ingest(raw, stores[1], clock) for raw in mixed()]
    assert [(r.status, r.seq, r.session_id) for r in batched] == [(r.status, r.seq, r.session_id) for r in single]
    assert [(r.run.session_id, r.run.seq_to) for r in batched if r.run] == [("s2", 48)]
    assert [(r.run.session_id, r.run.seq_to) for r in single if r.run] == [("s2", 45)]
    for session_id in ("s1", "s2"):
        a, b = (s.ingest.get_session(session_id) for s in stores)
        assert (a.last_seq, a.duplicates, a.users, a.last_activity_at) == (b.last_seq, b.duplicates, b.users, b.last_activity_at)
        assert [m.model_dump() for m in stores[0].ingest.get_messages(session_id, 1, 99)] == \
            [m.model_dump() for m in stores[1].ingest.get_messages(session_id, 1, 99)]
    for s in stores:
        s.close()


def test_session_end_before_any_message_says_the_session_is_not_known_yet(store, clock):
    early = ingest(ended(), store, clock)
    assert (early.status, early.run, early.session_unknown) == ("accepted", None, True)
    assert early.then == DeliverAgain(deferrals=1, countdown_s=END_DEFERRAL_BASE_S)
    ingest(message(1), store, clock)
    redelivered = ingest(ended(), store, clock)
    assert redelivered.session_unknown is False
    assert (redelivered.run.reason, redelivered.run.seq_to) == ("session_end", 1)
    assert redelivered.then == StartRun(redelivered.run.run_id)


def test_session_end_of_a_declared_session_with_no_message_waits_for_its_messages(store, clock):
    store.ingest.declare_session_users("s1", "agent-1", ["u1", "u2"])
    early = ingest(ended(), store, clock)
    assert (early.status, early.run, early.session_unknown) == ("accepted", None, True)
    assert store.ingest.get_session("s1").ended_at is None
    late = [ingest(message(n), store, clock) for n in (1, 2)]  # written before the end
    assert [r.run for r in late] == [None, None]
    redelivered = ingest(ended(), store, clock)
    assert (redelivered.run.reason, redelivered.run.seq_from, redelivered.run.seq_to) == ("session_end", 1, 2)


def test_no_claim_is_attempted_while_another_run_holds_the_session(tmp_path, clock):
    class CountingRuns(SQLiteRuns):
        claims = 0

        def try_claim(self, *args, **kwargs):
            CountingRuns.claims += 1
            return super().try_claim(*args, **kwargs)

    class CountingStore(SQLiteStore):
        REPOSITORIES = {**SQLiteStore.REPOSITORIES, "runs": CountingRuns}

    counting = CountingStore(str(tmp_path / "counting.db"))
    for n in range(1, 46):
        ingest(message(n, role="assistant", content="ok"), counting, clock)
    assert CountingRuns.claims == 1  # the 45th message claimed 1..45; that run is still live
    results = [ingest(message(n, role="assistant", content="ok"), counting, clock) for n in range(46, 100)]
    assert CountingRuns.claims == 1 and all(r.run is None for r in results)
    held = counting.ingest.get_session("s1").active_run_id
    counting.runs.finish_run(held, T0, {}, [])
    after = ingest(message(100, role="assistant", content="ok"), counting, clock)
    assert (after.run.seq_from, after.run.seq_to) == (46, 100)
    counting.close()


def test_events_of_another_agent_on_a_taken_session_id_are_rejected_and_recorded(store, clock):
    """A session belongs to the agent of its first message: another agent's message or end on
    that id is refused like an invalid event, and good events around it go on."""
    intruder = message(3, agent_id="agent-2", session_users=["u9"], sender="u9")
    intruder_end = dict(ended(event_id="end-2"), agent_id="agent-2")
    batch = [message(1), message(2), intruder, message(1, session="s2"), intruder_end, message(4)]
    out = ingest_raw_events(batch, store, SETTINGS, clock)
    assert [r.status for r in out.results] == ["accepted", "accepted", "rejected", "accepted", "rejected", "accepted"]
    owned = [{"field": "session_id", "reason": "session s1 belongs to another agent"}]
    assert out.results[2].errors == owned and out.results[4].errors == owned
    assert all(r.run is None and r.then == Done() for r in out.results)
    session = store.ingest.get_session("s1")
    assert (session.agent_id, session.last_seq, session.users, session.ended_at) == ("agent-1", 3, ["u1"], None)
    assert [m.agent_id for m in store.ingest.get_messages("s1", 1, 9)] == ["agent-1"] * 3
    recorded = {r.event_id: r for r in store.ingest.list_rejections()}
    assert set(recorded) == {"e-s1-3", "end-2"}
    assert json.loads(recorded["e-s1-3"].raw) == intruder and recorded["e-s1-3"].agent_id == "agent-2"
    assert recorded["end-2"].errors == owned and recorded["end-2"].session_id == "s1"
    single = ingest(intruder, store, clock)  # one event at a time: the same refusal
    assert (single.status, single.errors) == ("rejected", owned)
    assert store.ingest.get_session("s1").last_seq == 3


class PoisonIngest(SQLiteIngest):
    """Fails with a programming error on any write that holds one given event, quoting the
    message's content in the error as careless code would."""

    poison = ""

    def ingest_messages(self, messages, now):
        for m in messages:
            if m.event_id == self.poison:
                raise RuntimeError(f"cannot store {m.content!r}: bad state")
        return super().ingest_messages(messages, now)


class PoisonStore(SQLiteStore):
    REPOSITORIES = {**SQLiteStore.REPOSITORIES, "ingest": PoisonIngest}

    def __init__(self, path, poison):
        super().__init__(path)
        self.ingest.poison = poison


def test_an_unexpected_error_fails_only_its_event_which_is_recorded_for_replay(tmp_path, clock):
    secret = "my door code is 4711 and I live at 12 Elm Street"
    poison = message(3, content=secret)
    store = PoisonStore(str(tmp_path / "poison.db"), poison="e-s1-3")
    batch = [message(1), message(2), poison, message(4), "not json"]
    out = ingest_raw_events(batch, store, SETTINGS, clock)
    assert [r.status for r in out.results] == ["accepted", "accepted", "rejected", "accepted", "rejected"]
    assert [(i, type(exc)) for i, exc in out.failures] == [(2, RuntimeError)]
    assert out.error is None and out.next_index == len(batch)
    assert [m.event_id for m in store.ingest.get_messages("s1", 1, 9)] == ["e-s1-1", "e-s1-2", "e-s1-4"]
    [recorded] = [r for r in store.ingest.list_rejections() if r.event_id == "e-s1-3"]
    assert json.loads(recorded.raw) == poison
    [error] = recorded.errors
    assert error["field"] == "<internal>"
    assert error["reason"].startswith("internal error: RuntimeError: cannot store")
    assert "Elm" not in error["reason"] and "4711" not in error["reason"]
    store.ingest.poison = None  # the cause is fixed: the recorded payload ingests as it was sent
    assert ingest(recorded.raw, store, clock).seq == 4
    store.close()


def test_a_messages_metadata_is_stored_with_it(store, clock):
    metadata = {"project": "apollo", "tier": 2, "beta": False, "deal.stage": "won"}
    assert ingest(message(1, metadata=metadata), store, clock).status == "accepted"
    assert ingest(message(2), store, clock).status == "accepted"
    first, second = store.ingest.get_messages("s1", 1, 2)
    assert first.metadata == metadata and second.metadata == {}


def test_a_redelivered_message_with_other_metadata_keeps_what_was_stored_first(store, clock):
    # as with a changed content: the first delivery is the message, a later one a duplicate
    ingest(message(1, metadata={"project": "apollo"}), store, clock)
    again = ingest(message(1, metadata={"project": "zeus"}, event_id="another-event"), store, clock)
    assert again.status == "duplicate"
    [stored] = store.ingest.get_messages("s1", 1, 1)
    assert stored.metadata == {"project": "apollo"}


def test_bad_metadata_is_rejected_naming_the_key_and_nothing_is_stored(store, clock):
    result = ingest(message(1, metadata={"tier": 2.5}), store, clock)
    assert result.status == "rejected"
    assert result.errors == [{"field": "metadata.tier", "reason": "2.5 is a fraction; a value is a string, "
                                                                  "a whole number or a boolean"}]
    assert store.ingest.count_messages("s1") == 0
