"""The store contract for ``ingest_messages``: a batch gives the outcomes and the state that
ingesting its messages one by one gives, on every adapter."""

from __future__ import annotations

import pytest

from pipeline.store.sqlite import SQLiteStore
from tests.pipeline.store.conftest import ADAPTERS, open_adapter
from testkit.documents import at, message


def mixed_batch():
    """Two sessions, humans and tiers, duplicates of the batch's own messages by event id and
    by (session, message id), and a message that arrives with an earlier ``now``."""
    return [
        message(1, user="u1", users=["u1"], tier=0, tokens=3.0),
        message(1, session="s2", role="assistant", users=[], preview=True),
        message(2, user="u2", users=["u1", "u2"], tier=2, tokens=4.5),
        message(9, event_id="s1-e1"),  # the first message again, under its event id
        message(2, session="s2", role="assistant", users=[]),
        message(1, session="s2", event_id="fresh-event"),  # s2's m1 again, under a new event id
        message(3, role="assistant", users=[], tokens=1.0, created=at(-5)),
    ]


def state(store, session_ids=("s1", "s2")):
    out = {}
    for session_id in session_ids:
        session = store.ingest.get_session(session_id)
        out[session_id] = (
            session.model_dump(),
            [m.model_dump() for m in store.ingest.get_messages(session_id, 1, 100)],
        )
    return out


def outcome_rows(outcomes):
    return [(o.status, o.seq, o.session.model_dump()) for o in outcomes]


@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_batch_gives_the_outcomes_and_state_of_one_by_one_ingest(kind, tmp_path):
    batched, single = (open_adapter(kind, tmp_path / name) for name in ("batched", "single"))
    for s in (batched, single):
        s.create_indexes()
        s.ingest.ingest_message(message(5, session="s2", role="assistant", users=[]), at(100))  # stored earlier
    together = batched.ingest.ingest_messages(mixed_batch(), at(50))
    apart = [single.ingest.ingest_message(m, at(50)) for m in mixed_batch()]
    assert [o.status for o in together] == [
        "accepted", "accepted", "accepted", "duplicate", "accepted", "duplicate", "accepted",
    ]
    assert outcome_rows(together) == outcome_rows(apart)
    assert state(batched) == state(single)
    s1, s2 = batched.ingest.get_session("s1"), batched.ingest.get_session("s2")
    assert (s1.last_seq, s1.duplicates, s1.users, s1.max_tier, s1.tokens_since) == (3, 1, ["u1", "u2"], 2, 8.5)
    assert (s2.last_seq, s2.duplicates, s2.preview, s2.last_activity_at) == (3, 1, True, at(100))
    for s in (batched, single):
        s.close()


def test_a_batch_repeated_is_all_duplicates_and_changes_only_the_counters(store):
    first = store.ingest.ingest_messages(mixed_batch(), at(50))
    before = state(store)
    again = store.ingest.ingest_messages(mixed_batch(), at(60))
    assert [o.status for o in again] == ["duplicate"] * len(again)
    after = state(store)
    for session_id in ("s1", "s2"):
        session_before, messages_before = before[session_id]
        session_after, messages_after = after[session_id]
        assert messages_after == messages_before
        added = sum(1 for m in mixed_batch() if m.session_id == session_id)
        assert session_after == {**session_before, "duplicates": session_before["duplicates"] + added}
    assert [o.seq for o in first if o.status == "accepted"] == [1, 1, 2, 2, 3]


def test_an_empty_batch_changes_nothing(store):
    assert store.ingest.ingest_messages([], at(1)) == []
    assert store.ingest.get_session("s1") is None


def test_a_sqlite_batch_that_fails_half_way_stores_nothing(tmp_path):
    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.ingest.ingest_message(message(1), at(1))
    broken = [message(2), message(3), object()]  # the third is no message at all
    with pytest.raises(AttributeError):
        store.ingest.ingest_messages(broken, at(3))
    assert store.ingest.count_messages("s1") == 1
    assert store.ingest.get_session("s1").last_seq == 1
    assert store.ingest.ingest_messages([message(2), message(3)], at(3))[-1].seq == 3
    store.close()


def test_an_in_memory_sqlite_store_ingests_a_batch_like_a_file(tmp_path):
    memory, on_disk = SQLiteStore(":memory:"), SQLiteStore(str(tmp_path / "memory.db"))
    outcomes = [s.ingest.ingest_messages(mixed_batch(), at(50)) for s in (memory, on_disk)]
    assert outcome_rows(outcomes[0]) == outcome_rows(outcomes[1])
    assert state(memory) == state(on_disk)
    for s in (memory, on_disk):
        s.close()
