"""get_memory_context(query=...): the facts a search for the current message finds are in
the context, within its budget, whatever their age."""

from datetime import timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.errors import InvalidInput
from pipeline.service import MemoryService
from schemas.documents import ConsolidatedBlob
from schemas.settings import Settings
from testkit.documents import T0, fact, reflection
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

EMB = HashingEmbedder(64)
NOW = T0 + timedelta(days=30)


def _service(store, **settings):
    return MemoryService("a1", settings=Settings(_env_file=None, **settings), store=store, embedder=EMB,
                         clock=FrozenClock(NOW))


def _fact(store, fid, content, *, user=None, days_ago=0.0):
    store.facts.insert_fact(fact(fid, content, user=user, embedding=EMB.embed([content]).vectors[0], model=EMB.model,
                           formed=NOW - timedelta(days=days_ago)))
    store.leases.bump_scope_versions("a1", ["agent" if user is None else f"user:{user}"])


@pytest.fixture
def memory(store):
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="agent", scope_key="agent", consolidated_content="VERSION: 1\n"
                                     "Mars project is on track.", word_limit=300, version=1), expected_version=0)
    store.reflections.insert_reflections([reflection("r1", "Planning the venue today", scope="session", session="s1")])
    store.leases.bump_scope_versions("a1", ["agent", "session:s1"])
    _fact(store, "old", "Maya moved from Lisbon to Porto", user="u1", days_ago=20)   # beyond the 7-day window
    for i in range(45):                                                               # the FIFO is full anyway
        _fact(store, f"n{i}", f"numbered note {i:02d} about the weekly sync", days_ago=i / 24)
    _fact(store, "bob", "Bob lives in Porto", user="u2", days_ago=1)
    return store


def _section(xml: str, tag: str) -> str:
    return xml[xml.index(f"<{tag}>"):xml.index(f"</{tag}>")] if f"<{tag}>" in xml else ""


def test_an_old_fact_that_answers_the_message_is_in_the_context(memory):
    service = _service(memory)
    plain = service.get_memory_context(session_id="s1", user_id="u1")
    assert "Porto" not in plain                            # too old, and 40 newer facts fill <Facts>
    xml = service.get_memory_context(session_id="s1", user_id="u1", query="Where does Maya live now? Porto?")
    relevant = _section(xml, "RelevantFacts")
    assert "[user] Maya moved from Lisbon to Porto (20d ago)" in relevant
    assert "Bob" not in xml                                 # another user's fact stays invisible
    assert xml.index("<Consolidated>") < xml.index("<RelevantFacts>") < xml.index("<Facts>")
    assert xml.count("Maya moved") == 1                     # not listed again among the recent facts


def test_a_fact_found_for_the_message_is_not_repeated_among_the_recent_ones(memory):
    xml = _service(memory).get_memory_context(session_id="s1", user_id="u1", query="numbered note 03 weekly sync")
    assert "numbered note 03" in _section(xml, "RelevantFacts")
    assert "numbered note 03" not in _section(xml, "Facts")


def test_within_a_tight_budget_the_found_facts_go_after_reflections_and_before_recent_facts(memory):
    service = _service(memory, context_max_tokens=100)
    xml = service.get_memory_context(session_id="s1", user_id="u1", query="Maya Lisbon Porto")
    assert len(xml) / 4.5 <= 100
    assert "Maya moved from Lisbon to Porto" in xml and "Planning the venue" in xml
    assert xml.count("numbered note") < 40 and 'facts="' in xml
    # tighter: the found fact goes before the reflection does (design §6: facts first)
    tight = service.get_memory_context(session_id="s1", user_id="u1", query="Maya Lisbon Porto", max_tokens=75)
    assert "Maya moved" not in tight and 'relevant_facts="1"' in tight
    assert "Planning the venue" in tight


def test_a_context_for_a_message_is_never_served_from_or_put_in_the_cache(memory):
    service = _service(memory)
    plain = service.get_memory_context(session_id="s1", user_id="u1")
    found = service.get_memory_context(session_id="s1", user_id="u1", query="Maya Lisbon Porto")
    assert found != plain
    assert service.get_memory_context(session_id="s1", user_id="u1") == plain
    other = service.get_memory_context(session_id="s1", user_id="u1", query="numbered note 07")
    assert "numbered note 07" in _section(other, "RelevantFacts") and "Maya" not in _section(other, "RelevantFacts")


def test_the_section_is_off_when_the_setting_is_zero(memory):
    xml = _service(memory, context_relevant_facts=0).get_memory_context(
        session_id="s1", user_id="u1", query="Maya Lisbon Porto")
    assert "<RelevantFacts>" not in xml and "Maya" not in xml


@pytest.mark.parametrize("bad", ["", "   ", 42, ["Maya"]])
def test_a_query_that_is_not_a_message_is_refused_with_the_field_named(memory, bad):
    with pytest.raises(InvalidInput, match="query"):
        _service(memory).get_memory_context(session_id="s1", user_id="u1", query=bad)
