"""Which text of a fact was valid when, and what a scope held at a past time (pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.validity import memory_as_of, newest_valid_at, valid_at, version_at, versions
from schemas.documents import ConsolidatedBlob, Fact, FactHistoryEntry
from testkit.documents import T0, at, fact, reflection

DAY = 86400


def _corrected() -> Fact:
    """Lyon said at 0, Porto said at 10 days and recorded at 10 days + 1 minute."""
    return fact("f", "Alice lives in Porto", user="u1", formed=at(60)).model_copy(update={
        "version": 2, "valid_from": at(10 * DAY), "updated_at": at(10 * DAY + 60),
        "history": [FactHistoryEntry(content="Alice lives in Lyon", version=1, changed_at=at(10 * DAY + 60),
                                     run_id="r2", valid_from=at(0), valid_to=at(10 * DAY))],
    })


@pytest.mark.parametrize(("seconds", "expected"), [
    (-1, None), (0, "Alice lives in Lyon"), (10 * DAY - 1, "Alice lives in Lyon"),
    (10 * DAY, "Alice lives in Porto"), (100 * DAY, "Alice lives in Porto"),
])
def test_the_version_valid_at_a_time_is_the_one_whose_interval_holds_it(seconds, expected):
    found = version_at(_corrected(), at(seconds))
    assert (found.content if found else None) == expected


def test_each_version_is_recorded_when_it_was_written():
    lyon, porto = versions(_corrected())
    assert (lyon.recorded_at, lyon.current) == (at(60), False)
    assert (porto.recorded_at, porto.current) == (at(10 * DAY + 60), True)


def test_a_record_of_the_old_shape_loads_and_its_versions_come_from_its_change_times():
    old = {
        "fact_id": "f", "agent_id": "a1", "scope": "user", "user_id": "u1", "scope_key": "user:u1",
        "content": "Alice lives in Porto", "hash": "h", "formed_at": T0.isoformat(),
        "updated_at": at(5 * DAY).isoformat(), "version": 3,
        "history": [{"content": "Alice lives in Lyon", "version": 1, "changed_at": at(2 * DAY).isoformat()},
                    {"content": "Alice lives in Nice", "version": 2, "changed_at": at(5 * DAY).isoformat()}],
        "retired_at": at(9 * DAY).isoformat(), "retired_by": "r9",
    }
    loaded = Fact.model_validate(old)
    assert (loaded.valid_from, loaded.valid_to, loaded.changed_at) == (at(5 * DAY), at(9 * DAY), at(5 * DAY))
    assert [(v.content, v.valid_from, v.valid_to) for v in versions(loaded)] == [
        ("Alice lives in Lyon", T0, at(2 * DAY)), ("Alice lives in Nice", at(2 * DAY), at(5 * DAY)),
        ("Alice lives in Porto", at(5 * DAY), at(9 * DAY))]
    assert version_at(loaded, at(9 * DAY)) is None
    never_updated = Fact.model_validate({**old, "updated_at": None, "history": [], "version": 1, "retired_at": None})
    assert (never_updated.updated_at, never_updated.valid_from, never_updated.valid_to) == (T0, T0, None)


def test_a_scope_as_of_a_time_shows_the_blob_only_if_consolidated_by_then_and_the_reflections_buffered_then():
    blob = ConsolidatedBlob(agent_id="a1", scope="user", scope_key="user:u1", consolidated_content="Likes tea.",
                            word_limit=300, version=2, last_consolidated_at=at(100))
    absorbed = reflection("r1", "absorbed at 100", formed=at(10)).model_copy(
        update={"absorbed": True, "absorbed_at": at(100), "consolidated_into": 2})
    later = reflection("r2", "formed at 200", formed=at(200))
    early = reflection("r3", "formed at 5", formed=at(5))
    assert memory_as_of(blob, [absorbed, later, early], at(50)) == ("", [early, absorbed])
    assert memory_as_of(blob, [absorbed, later, early], at(150)) == ("Likes tea.", [early])
    assert memory_as_of(blob, [absorbed, later, early], at(300)) == ("Likes tea.", [early, later])
    assert memory_as_of(None, [], T0 - timedelta(days=1)) == ("", [])


_FACT = st.tuples(
    st.integers(0, 50),                                            # formed
    st.lists(st.tuples(st.integers(0, 30), st.integers(-40, 30)), max_size=3),  # per UPDATE: later by, valid from
    st.one_of(st.none(), st.integers(0, 30)),                      # retired this long after its latest change
)


def _history_fact(i: int, spec) -> Fact:
    formed, updates, retired = spec
    changed, history, valid_from = at(formed), [], None
    for n, (later, valid) in enumerate(updates, start=1):
        changed += timedelta(seconds=later)
        history.append(FactHistoryEntry(content=f"text {i}.{n}", version=n, changed_at=changed, run_id=f"r{n}",
                                        valid_from=valid_from, valid_to=changed + timedelta(seconds=valid)))
        valid_from = changed + timedelta(seconds=valid)            # may lie before it was recorded
    return fact(f"f{i:03d}", f"text {i}", formed=at(formed)).model_copy(update={
        "version": len(updates) + 1, "history": history, "updated_at": changed, "valid_from": valid_from,
        "retired_at": None if retired is None else changed + timedelta(seconds=retired)})


@settings(max_examples=150, deadline=None)
@given(st.lists(_FACT, max_size=40), st.integers(-50, 150), st.integers(0, 12))
def test_the_newest_page_valid_then_read_latest_change_first_is_the_page_of_every_fact(specs, when, want):
    # what a page of a past time shows must not depend on reading every fact the agent ever had
    facts = [_history_fact(i, spec) for i, spec in enumerate(specs)]
    latest_first = sorted(facts, key=lambda f: f.changed_at, reverse=True)   # recent_facts' order
    reads = []

    def read(n):
        reads.append(n)
        return latest_first[:n]

    got = newest_valid_at(read, at(when), want)
    assert [(v.fact.fact_id, v.content) for v in got] == \
        [(v.fact.fact_id, v.content) for v in valid_at(facts, at(when))[:want]]
    assert reads == [] if want == 0 else reads[-1] <= max(want, 4 * len(facts))


def test_a_page_of_a_past_time_stops_reading_once_no_older_change_can_place_a_version_above_it():
    facts = [fact(f"f{i:03d}", f"text {i}", formed=at(i)) for i in range(1000)]   # none changed since
    latest_first = sorted(facts, key=lambda f: f.changed_at, reverse=True)
    reads = []
    got = newest_valid_at(lambda n: reads.append(n) or latest_first[:n], at(5000), 10)
    assert [v.fact.fact_id for v in got] == [f"f{i:03d}" for i in range(999, 989, -1)]
    assert reads == [10, 40]        # one batch past the page settles it: not the 1,000 facts
