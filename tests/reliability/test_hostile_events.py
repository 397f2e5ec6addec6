"""Hostile producer events through the ingest path (design §3): every invalid one gets a
structured rejection that is recorded with its raw payload, hostile but valid text is stored
verbatim, and good events in the same stream are unaffected."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from testkit.scenarios.fuzz import ACCEPT, KINDS, REJECT, fuzzed_event, fuzzed_stream, good_event
from pipeline.clock import FrozenClock
from pipeline.ingest import ingest_raw_event, ingest_raw_events
from pipeline.rejections import raw_text
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings

AGENT = "agent-fuzz"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = SQLiteStore(str(tmp_path_factory.mktemp("fuzz") / "memory.db"))
    db.create_indexes()
    yield db
    db.close()


@pytest.fixture(scope="module")
def settings():
    return Settings(store_url="sqlite:///unused.db")


def _rejections(store) -> dict[str, list]:
    by_raw: dict[str, list] = {}
    for r in store.ingest.list_rejections(limit=100_000):
        by_raw.setdefault(r.raw, []).append(r)
    return by_raw


def _assert_outcome(store, fuzzed, result, rejected_before: int) -> None:
    if fuzzed.expect == "reject":
        assert result.status == "rejected", f"{fuzzed.kind} was {result.status}: {fuzzed.raw!r:.300}"
        assert result.errors, fuzzed.kind
        for error in result.errors:
            assert error["field"] and error["reason"], error
        recorded = _rejections(store).get(raw_text(fuzzed.raw), [])
        assert recorded, f"{fuzzed.kind}: the rejection was not recorded with its raw payload"
        assert recorded[0].errors == result.errors
    else:
        assert result.status == "accepted", f"{fuzzed.kind} was {result.status}: {result.errors}"
        stored = store.ingest.get_messages(fuzzed.session_id, 1, 10**9)
        assert [(m.message_id, m.content, m.agent_id) for m in stored] == [
            (fuzzed.message_id, fuzzed.content, AGENT)
        ]
        assert len(store.ingest.list_rejections(limit=100_000)) == rejected_before


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_hostile_event_gets_the_outcome_the_catalogue_expects(store, settings, kind):
    rng = random.Random(f"kind-{kind}")
    for n in range(5):
        fuzzed = fuzzed_event(rng, kind, AGENT, f"k-{kind}-{n}", n)
        before = len(store.ingest.list_rejections(limit=100_000))
        result = ingest_raw_event(fuzzed.raw, store, settings, FrozenClock())
        _assert_outcome(store, fuzzed, result, before)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(KINDS))
def test_generated_hostile_events_are_rejected_and_recorded_or_stored_verbatim(store, settings, rng, kind):
    session_id = f"h-{rng.randrange(10**12)}"
    fuzzed = fuzzed_event(rng, kind, AGENT, session_id, rng.randrange(10**6))
    if fuzzed.expect == "accept" and store.ingest.get_session(fuzzed.session_id) is not None:
        return  # the same session id drawn twice: its message would be a counted duplicate
    before = len(store.ingest.list_rejections(limit=100_000))
    result = ingest_raw_event(fuzzed.raw, store, settings, FrozenClock())
    _assert_outcome(store, fuzzed, result, before)


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), size=st.integers(min_value=1, max_value=25))
def test_good_events_in_a_hostile_batch_are_stored_once_and_in_order(store, settings, rng, size):
    stream = fuzzed_stream(rng, AGENT, size, good_ratio=0.4)
    sessions = {f.session_id for f in stream if f.expect == "accept"}
    if any(store.ingest.get_session(s) is not None for s in sessions) or len(sessions) < sum(f.expect == "accept" for f in stream):
        return  # a session id drawn twice
    before = len(store.ingest.list_rejections(limit=100_000))
    batch = ingest_raw_events([f.raw for f in stream], store, settings, FrozenClock())
    assert batch.error is None
    assert [r.status for r in batch.results] == [
        "rejected" if f.expect == "reject" else "accepted" for f in stream
    ]
    for fuzzed in stream:
        if fuzzed.expect == "accept":
            stored = store.ingest.get_messages(fuzzed.session_id, 1, 10**9)
            assert [(m.seq, m.content) for m in stored] == [(1, fuzzed.content)]
    assert len(store.ingest.list_rejections(limit=100_000)) == before + sum(f.expect == "reject" for f in stream)


def test_the_catalogue_covers_every_class_of_bad_input_the_issue_names():
    assert {"wrong_type", "missing_field", "huge_content", "not_utf8", "unknown_role", "control_char_id"} <= set(REJECT)
    assert {"injection_content", "injection_id"} <= set(ACCEPT)


def test_a_replayed_good_event_after_hostile_ones_is_a_counted_duplicate(store, settings):
    rng = random.Random(3)
    good = good_event(rng, AGENT, "dup-session", 1)
    first = ingest_raw_event(good, store, settings, FrozenClock())
    for kind in REJECT:
        ingest_raw_event(fuzzed_event(rng, kind, AGENT, "dup-session", 1).raw, store, settings, FrozenClock())
    again = ingest_raw_event(good, store, settings, FrozenClock())
    assert (first.status, again.status) == ("accepted", "duplicate")
    assert store.ingest.count_messages("dup-session") == 1
    assert store.ingest.get_session("dup-session").duplicates == 1
