"""What only the Mongo adapter must handle: a crash between the single-document steps of an
ingest, a claim or a finish (no transactions). Each test leaves the collections exactly as
such a crash would, then checks that the next call completes the work without a double count.
"""

from __future__ import annotations

import pytest

from pipeline.store import _common as c
from pipeline.store.mongo import MongoStore
from pipeline.trigger import ClaimRule
from schemas.documents import StoredMessage
from testkit.documents import at, message, run
from testkit.mongo_emulation import emulated_database

ANY = ClaimRule(min_messages=1)


@pytest.fixture
def store():
    opened = MongoStore(emulated_database())
    opened.create_indexes()
    return opened


def _crash_after_insert(store, m: StoredMessage) -> None:
    """What the former three-step ingest left when it died after its first step: the message
    stored without a seq."""
    store.col("messages").insert_one(m.model_dump(exclude={"seq"}))


def _crash_after_counting(store, m: StoredMessage, seq: int) -> None:
    """What the former ingest left when it died after its second step: the seq counted on the
    session and noted in its ``recent`` list, the message still without it."""
    _crash_after_insert(store, m)
    store.col("sessions").update_one({"_id": m.session_id}, {
        "$set": {"last_seq": seq, "recent": [{"e": m.event_id, "s": seq}]},
        "$inc": {"messages_since": 1, "tokens_since": m.weighted_tokens}})


def test_redelivery_completes_a_message_stored_without_seq(store):
    store.ingest.ingest_message(message(1), at(1))
    _crash_after_insert(store, message(2))
    assert store.ingest.get_messages("s1", 1, 10)[-1].message_id == "m1"  # not yet readable by seq
    again = store.ingest.ingest_message(message(2), at(2))
    assert (again.status, again.seq) == ("accepted", 2)
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.messages_since, session.duplicates) == (2, 2, 0)
    assert [m.seq for m in store.ingest.get_messages("s1", 1, 2)] == [1, 2]


def test_redelivery_after_the_seq_was_assigned_does_not_count_twice(store):
    store.ingest.ingest_message(message(1), at(1))
    _crash_after_counting(store, message(2), 2)
    store.ingest.ingest_message(message(3), at(3))  # another message arrives meanwhile
    again = store.ingest.ingest_message(message(2), at(4))
    assert again.status == "duplicate"  # the seq was counted before the crash
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.messages_since) == (3, 3)
    assert [(m.message_id, m.seq) for m in store.ingest.get_messages("s1", 1, 3)] == [("m1", 1), ("m2", 2), ("m3", 3)]


def test_a_claim_pending_run_that_never_got_its_range_is_dropped_by_reopen(store):
    store.ingest.ingest_message(message(1), at(1))
    orphan = c.claimed_run(store.ingest.get_session("s1"), run("orphan"), at(2), 60)
    doc = orphan.model_dump()
    doc.update(_id="orphan", _claim_pending=True)
    store.col("runs").insert_one(doc)
    assert [r.run_id for r in store.runs.find_stale_runs(at(100), 10)] == ["orphan"]
    assert store.runs.reopen_run("orphan", at(100), 60) is None
    assert store.runs.get_run("orphan") is None
    assert store.runs.try_claim("s1", ANY, run("r2"), at(101), 60).seq_from == 1


def test_a_claim_pending_run_that_holds_the_session_is_adopted_by_reopen(store):
    store.ingest.ingest_message(message(1), at(1))
    won = store.runs.try_claim("s1", ANY, run("r1"), at(2), 60)
    store.col("runs").update_one({"_id": "r1"}, {"$set": {"_claim_pending": True}})  # crash before unmarking
    reopened = store.runs.reopen_run("r1", at(100), 60)
    assert (reopened.seq_from, reopened.seq_to, reopened.attempts) == (won.seq_from, won.seq_to, 2)
    assert "_claim_pending" not in store.col("runs").find_one({"_id": "r1"})


def test_a_session_left_pointing_at_a_finished_run_is_freed_by_the_next_claim(store):
    store.ingest.ingest_message(message(1), at(1))
    store.runs.try_claim("s1", ANY, run("r1"), at(2), 60)
    store.col("runs").update_one({"_id": "r1"}, {"$set": {"status": "dead"}})  # crash before the release
    store.ingest.ingest_message(message(2), at(3))
    assert store.runs.try_claim("s1", ANY, run("r2"), at(4), 60).seq_from == 2


def test_finish_repeated_after_a_crash_completes_the_release(store):
    store.ingest.ingest_message(message(1), at(1))
    store.runs.try_claim("s1", ANY, run("r1"), at(2), 60)
    store.col("runs").update_one({"_id": "r1"}, {"$set": {"status": "done"}})  # flipped, session untouched
    assert store.runs.finish_run("r1", at(3), {}, []) is False
    session = store.ingest.get_session("s1")
    assert (session.watermark, session.active_run_id) == (1, None)


def test_no_user_id_becomes_a_field_name(store):
    from schemas.documents import CachedContext

    odd = "user.with$dots"
    store.contexts.put_cached_context(CachedContext(session_id="s1", user_id=odd, agent_id="a1", xml="<x/>", built_at=at(1),
                                           versions={f"user:{odd}": 3}))
    doc = store.col("contexts").find_one({"user_id": odd})
    assert doc["versions"] == [{"k": f"user:{odd}", "v": 3}]
    assert store.contexts.get_cached_context("s1", odd).versions == {f"user:{odd}": 3}


# ---------------------------------------------------------------------- a crash mid-ingest ----
class Crash(Exception):
    """The ingesting process died."""


_WRITES = {"insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one",
           "delete_many", "find_one_and_update", "find_one_and_replace", "find_one_and_delete", "bulk_write"}


class _Dying:
    """The database as seen by a process that dies right after its ``writes``-th write: that
    write is applied, nothing after it is (a fault injected at every step of the ingest)."""

    def __init__(self, database, writes: int) -> None:
        self._database, self.left = database, writes

    def __getitem__(self, name: str):
        return _DyingCollection(self._database[name], self)

    def __getattr__(self, name: str):
        return getattr(self._database, name)


class _DyingCollection:
    def __init__(self, collection, process: _Dying) -> None:
        self._collection, self._process = collection, process

    def __getattr__(self, name: str):
        attr = getattr(self._collection, name)
        if name not in _WRITES:
            return attr

        def write(*args, **kwargs):
            if self._process.left <= 0:
                raise Crash(f"dead before {name}")
            result = attr(*args, **kwargs)
            self._process.left -= 1
            if self._process.left == 0:
                raise Crash(f"died right after {name}")
            return result

        return write


def _formed(store, claimed) -> list[str]:
    if claimed is None:
        return []
    store.runs.finish_run(claimed.run_id, at(50), {}, [])
    return [m.message_id for m in store.ingest.get_messages("s1", claimed.seq_from, claimed.seq_to)]


@pytest.mark.parametrize("then", ["redelivery", "next message", "session end"])
@pytest.mark.parametrize("writes", [1, 2, 3])
def test_a_message_whose_ingest_died_at_any_step_is_formed_once_by_a_later_run(store, writes, then):
    """Whatever write the ingest of m2 died after, and with a claim racing in right then, m2
    is formed exactly once: by that claim, or by a later run once the ingest is redelivered,
    the next message arrives or the session ends (the session-end rule claims any message)."""
    store.ingest.ingest_message(message(1), at(1))
    healthy = store.database
    store.database = _Dying(healthy, writes)
    try:
        store.ingest.ingest_message(message(2), at(2))
    except Crash:
        pass
    finally:
        store.database = healthy
    formed = _formed(store, store.runs.try_claim("s1", ANY, run("r1"), at(3), 60))  # the racing claim
    expected = ["m1", "m2"]
    if then == "redelivery":
        store.ingest.ingest_message(message(2), at(4))
    elif then == "next message":
        store.ingest.ingest_message(message(3), at(4))
        expected.append("m3")
    formed += _formed(store, store.runs.try_claim("s1", ANY, run("r2"), at(5), 60))
    assert sorted(formed) == expected
    session = store.ingest.get_session("s1")
    assert session.last_seq == len(expected) and session.claimed_through == session.last_seq


def test_ingests_dying_midway_while_others_ingest_and_claim_leave_every_message_formed_once():
    """Four threads ingest into one session and claim after each message; every third ingest
    dies after its first or its second write. The dead ones are delivered again (the broker redelivers an
    unacknowledged event) and the session ends: each message is in exactly one run."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    database = emulated_database()
    MongoStore(database).create_indexes()
    barrier, died, formed = threading.Barrier(4), [], []

    def worker(w: int) -> None:
        healthy = MongoStore(database)
        barrier.wait()
        for i in range(12):
            m = message(w * 100 + i, event_id=f"w{w}-e{i}", created=at(i))
            if i % 3 == 1:
                try:
                    MongoStore(_Dying(database, 1 + i // 3 % 2)).ingest.ingest_message(m, at(i))
                except Crash:
                    died.append(m)
            else:
                healthy.ingest.ingest_message(m, at(i))
            claimed = healthy.runs.try_claim("s1", ANY, run(f"r{w}-{i}"), at(i), 600)
            formed.extend(_formed(healthy, claimed))  # what the run's first stage reads, right away

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))
    store = MongoStore(database)
    for m in died:  # "accepted" when the first write was another one (a session, a count it helped)
        assert store.ingest.ingest_message(m, at(50)).status in ("accepted", "duplicate")
    formed.extend(_formed(store, store.runs.try_claim("s1", ANY, run("r-end"), at(60), 600)))
    assert sorted(formed) == sorted(f"m{w * 100 + i}" for w in range(4) for i in range(12))
    session = store.ingest.get_session("s1")
    assert (session.last_seq, session.claimed_through) == (48, 48)
