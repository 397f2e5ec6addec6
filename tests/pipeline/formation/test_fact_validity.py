"""Corrections weeks apart, through the real stages and read back through ``MemoryService``
(design §11 "Time"): an UPDATE refreshes the fact's latest change, closes the old text's
validity where the new one's opens, and ``as_of`` shows what was valid then."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pipeline.errors import InvalidInput
from pipeline.context import render_xml
from pipeline.formation import stages
from pipeline.formation.finish import fact_counts
from pipeline.service import MemoryService
from pipeline.validity import version_at

from testkit.formation import decisions, facts

LYON, PORTO = "Alice lives in Lyon", "Alice lives in Porto"
WHERE = "Alice Porto Lyon lives"  # matches both texts with the tests' hashing embedder
ALICE = {"session_id": "s-9", "user_id": "u-1"}


def _form(env, said: str, fact: str, answer=None) -> str:
    env.llm.on("extract_facts", facts(("user", fact)), times=1)
    if answer is not None:
        env.llm.on("decide_facts", answer, times=1)
    run_id = env.new_run([("user", "u-1", said), ("assistant", None, "Noted.")])
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(run_id, env) is not None
    return run_id


def _said_at(env, run_id: str) -> datetime:
    run = env.store.runs.get_run(run_id)
    [message] = [m for m in env.store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to) if m.role == "user"]
    return message.created_at


def _service(env) -> MemoryService:
    return MemoryService("agent-1", settings=env.settings, store=env.store, search=env.search,
                         embedder=env.embedder, clock=env.clock, run_starter=lambda run_id: None)


@pytest.fixture
def moved(env):
    """Lyon said at day 0; 30 days later, Porto, merged into the same fact by an UPDATE."""
    first = _form(env, "I live in Lyon.", LYON)
    env.clock.advance(days=30)
    second = _form(env, "I moved to Porto.", PORTO, decisions((0, "UPDATE", 0, PORTO)))
    return _said_at(env, first), _said_at(env, second)


def test_a_correction_of_a_month_old_fact_reaches_facts_as_fresh(env, moved):
    xml = _service(env).get_memory_context(**ALICE)
    assert f"- [user] {PORTO} (0m ago)" in xml
    assert LYON not in xml


def test_the_update_closes_the_old_texts_validity_where_the_new_ones_opens(env, moved):
    lyon_said, porto_said = moved
    [fact] = env.all_facts()
    assert (fact.content, fact.valid_from, fact.valid_to, fact.updated_at) == (PORTO, porto_said, None, env.clock.now())
    assert [(h.content, h.valid_from, h.valid_to) for h in fact.history] == [(LYON, lyon_said, porto_said)]
    assert fact.formed_at < lyon_said + timedelta(minutes=1)


def test_context_as_of_shows_what_was_valid_then_aged_then(env, moved):
    lyon_said, porto_said = moved
    service = _service(env)
    then = service.get_memory_context(**ALICE, as_of=lyon_said + timedelta(days=3, minutes=1))
    assert f"- [user] {LYON} (3d ago)" in then and PORTO not in then
    assert service.get_memory_context(**ALICE, as_of=lyon_said - timedelta(seconds=1)) == ""
    assert PORTO in service.get_memory_context(**ALICE, as_of=porto_said)


def test_a_context_as_of_another_time_is_never_served_from_or_stored_in_the_cache(env, moved):
    lyon_said, _ = moved
    service = _service(env)
    now_xml = service.get_memory_context(**ALICE)
    assert LYON in service.get_memory_context(**ALICE, as_of=lyon_said + timedelta(days=1))
    assert render_xml(env.store.contexts.get_cached_context("s-9", "u-1").content) == now_xml
    assert service.get_memory_context(**ALICE) == now_xml


def test_search_as_of_finds_the_text_valid_then(env, moved):
    lyon_said, porto_said = moved
    service = _service(env)
    [now_hit] = service.search_facts(WHERE, **ALICE)
    assert (now_hit["content"], now_hit["age"]) == (PORTO, "0m ago")
    [then_hit] = service.search_facts(WHERE, **ALICE, as_of=lyon_said + timedelta(days=10, minutes=1))
    assert (then_hit["content"], then_hit["id"], then_hit["age"]) == (LYON, now_hit["id"], "10d ago")
    assert (then_hit["valid_from"], then_hit["valid_to"]) == (lyon_said.isoformat(), porto_said.isoformat())
    assert service.search_facts(WHERE, **ALICE, as_of=lyon_said - timedelta(days=1)) == []


def test_a_retired_fact_is_found_as_of_before_it_was_contradicted(env):
    first = _form(env, "The launch is on March 3.", "The launch is on March 3")
    env.clock.advance(days=2)
    second = _form(env, "The launch is cancelled.", "The launch on March 3 is cancelled",
                   decisions((0, "DELETE", 0)))
    service = _service(env)
    before = service.search_facts("launch", **ALICE, as_of=_said_at(env, first) + timedelta(days=1))
    assert [r["content"] for r in before] == ["The launch is on March 3"]
    assert [r["content"] for r in service.search_facts("launch", **ALICE)] == ["The launch on March 3 is cancelled"]
    [old] = [f for f in env.all_facts() if f.retired_at is not None]
    assert old.valid_to == _said_at(env, second) and version_at(old, env.clock.now()) is None


@pytest.mark.parametrize("bad", [datetime(2026, 1, 1), "2026-01-01", 0])
def test_as_of_must_be_a_timezone_aware_datetime(env, bad):
    service = _service(env)
    with pytest.raises(InvalidInput, match="as_of"):
        service.get_memory_context(**ALICE, as_of=bad)
    with pytest.raises(InvalidInput, match="as_of"):
        service.search_facts("x", **ALICE, as_of=bad)


def test_as_of_is_keyword_only(env):
    with pytest.raises(TypeError):
        _service(env).search_facts("x", datetime.now(timezone.utc), **ALICE)


def test_a_statement_formed_after_its_correction_does_not_replace_it_and_stays_readable_as_of_then(env):
    """Two sessions of one user: Lyon said first in one, Porto a day later in the other, whose
    run forms first (it ended; the first is swept later). The late UPDATE carries the older
    statement: Porto stays live, Lyon is recorded as a past version, valid until Porto."""
    env.add_messages([("user", "u-1", "I live in Lyon."), ("assistant", None, "Noted.")], session_id="s-old")
    said_lyon = env.clock.now() - timedelta(seconds=1)
    env.clock.advance(days=1)
    _form(env, "I live in Porto.", PORTO)
    env.llm.on("extract_facts", facts(("user", LYON)), times=1)
    env.llm.on("decide_facts", decisions((0, "UPDATE", 0, LYON)), times=1)
    late = env.claim(session_id="s-old")
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(late, env) is not None

    assert [f.content for f in env.live_facts()] == [PORTO]
    [past] = [f for f in env.all_facts() if f.content == LYON]
    assert past.retired_at is not None and past.valid_from == said_lyon and past.valid_to == _said_at(env, "run-1")
    assert env.store.runs.get_run(late).effect_notes[0]["note"] == "update_of_newer"
    service = _service(env)
    assert LYON in service.get_memory_context(as_of=said_lyon + timedelta(hours=1), **ALICE)
    assert PORTO in service.get_memory_context(**ALICE) and LYON not in service.get_memory_context(**ALICE)


def test_an_older_contradiction_formed_after_the_newer_statement_does_not_retire_it(env):
    """As above, with the late run deciding DELETE: Porto was said after Lyon, so the late
    contradiction retires nothing; Lyon is recorded as a past version, valid until Porto."""
    env.add_messages([("user", "u-1", "I live in Lyon."), ("assistant", None, "Noted.")], session_id="s-old")
    said_lyon = env.clock.now() - timedelta(seconds=1)
    env.clock.advance(days=1)
    _form(env, "I live in Porto.", PORTO)
    env.llm.on("extract_facts", facts(("user", LYON)), times=1)
    env.llm.on("decide_facts", decisions((0, "DELETE", 0)), times=1)
    late = env.claim(session_id="s-old")
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(late, env) is not None
    stages.decide_facts(late, env)  # a redelivery applies nothing twice

    assert [f.content for f in env.live_facts()] == [PORTO]
    [past] = [f for f in env.all_facts() if f.content == LYON]
    assert past.retired_at is not None and past.valid_from == said_lyon and past.valid_to == _said_at(env, "run-1")
    assert [n["note"] for n in env.store.runs.get_run(late).effect_notes] == ["delete_of_newer"]
    counts = fact_counts(env.store.runs.get_run(late), {"added": 0, "updated": 0, "deleted": 1, "none": 0})
    assert counts["deleted"] == 0 and counts["delete_of_newer"] == 1  # what memoryctl runs reports
    service = _service(env)
    assert LYON in service.get_memory_context(as_of=said_lyon + timedelta(hours=1), **ALICE)
    assert PORTO in service.get_memory_context(**ALICE) and LYON not in service.get_memory_context(**ALICE)
