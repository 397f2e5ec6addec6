"""``memoryctl replay-rejected``: events recorded after an internal error go back to the broker."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from ops import cli
from usecases.replay import replay_rejected
from pipeline.clock import FrozenClock
from pipeline.errors import TransientError
from pipeline.ingest import ingest_raw_event
from pipeline.rejections import record_failure
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def event(n: int) -> dict:
    return {"type": "message.added", "event_id": f"e{n}", "agent_id": "a1", "session_id": "s1",
            "message": {"message_id": f"m{n}", "role": "assistant", "content": f"line {n}",
                        "created_at": T0.isoformat()}}


class Broker:
    """Holds what a broker would hold; stops accepting after ``capacity`` events."""

    def __init__(self, capacity: int = 100):
        self.held: list = []
        self.capacity = capacity

    def publish_one(self, payload) -> None:
        if len(self.held) >= self.capacity:
            raise TransientError("broker unavailable")
        self.held.append(payload)


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(str(tmp_path / "memory.db"))
    for n in (1, 2):
        record_failure(event(n), RuntimeError("boom"), s.ingest, T0 + timedelta(seconds=n))
    ingest_raw_event("{not json", s, Settings(), FrozenClock(T0))  # an invalid event
    yield s
    s.close()


def _ids(store) -> dict[str, str]:
    """event id (or the raw text) -> rejection id"""
    return {r.event_id or r.raw: r.rejection_id for r in store.ingest.list_rejections()}


def test_internal_error_rejections_are_published_as_received_oldest_first_and_dropped(store):
    broker = Broker()
    report = replay_rejected(store, broker)
    assert broker.held == [event(1), event(2)]
    assert len(report.replayed) == 2 and report.error is None
    assert list(_ids(store)) == ["{not json"]  # the invalid event is never replayed
    for payload in broker.held:  # a worker then ingests them as they were sent
        assert ingest_raw_event(payload, store, Settings(), FrozenClock(T0)).status == "accepted"


def test_a_broker_outage_half_way_keeps_the_rest_recorded(store):
    report = replay_rejected(store, Broker(capacity=1))
    assert isinstance(report.error, TransientError) and len(report.replayed) == 1
    assert set(_ids(store)) == {"e2", "{not json"}


def test_chosen_ids_replay_only_those_and_an_invalid_event_is_refused(store):
    ids = _ids(store)
    broker = Broker()
    report = replay_rejected(store, broker, ids=[ids["e2"], ids["{not json"], "nope"])
    assert broker.held == [event(2)]
    assert [rid for rid, _ in report.skipped] == [ids["{not json"], "nope"]
    assert set(_ids(store)) == {"e1", "{not json"}


def test_memoryctl_offers_replay_rejected_with_ids():
    args = cli.build_parser().parse_args(["replay-rejected", "--id", "x", "--id", "y"])
    assert args.id == ["x", "y"] and args.limit == 1000
