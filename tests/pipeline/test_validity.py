"""Which text of a fact was valid when, and what a scope held at a past time (pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipeline.validity import memory_as_of, version_at, versions
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
