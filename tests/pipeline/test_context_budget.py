"""The default context budget admits memory at the design's limits (design §6): every blob at
its word limit, the recent reflections and a page of facts, read through ``MemoryService``
with the shipped settings."""

import itertools
import json
from datetime import timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.packing import default_max_tokens
from pipeline.prompts.consolidation import BlobSection, blob_words, render_blob
from pipeline.service import MemoryService
from pipeline.text import word_count
from pipeline.trigger import estimate_tokens
from schemas.documents import ConsolidatedBlob
from schemas.settings import Settings
from testkit.documents import T0, fact, reflection
from testkit.procs import REPO_ROOT
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

NOW = T0 + timedelta(days=2)


def _demo_words() -> list[str]:
    """The words of the demo conversation: real chat text (5.6 characters a word with its space)."""
    lines = (REPO_ROOT / "ops" / "demo_data" / "launch_planning.jsonl").read_text(encoding="utf-8").splitlines()
    return " ".join(json.loads(line)["message"]["content"] for line in lines if '"message"' in line).split()


def _text(words: itertools.cycle, count: int) -> str:
    return " ".join(next(words) for _ in range(count))


def _blob_at_limit(words: itertools.cycle, limit: int) -> str:
    """A blob of exactly ``limit`` words as consolidation counts them, in sections of five
    ten-word bullets."""
    sections: list[BlobSection] = []
    while True:
        name = f"TOPIC {len(sections) + 1}"
        trial = [*sections, BlobSection(name=name, bullets=[])]
        left = limit - blob_words(1, trial)
        if left <= 0:
            break
        bullets = []
        while left > 1 and len(bullets) < 5:
            take = min(10, left)          # "- " is a word too
            bullets.append(_text(words, take - 1))
            left -= take
        sections = [*sections, BlobSection(name=name, bullets=bullets)]
        if left <= 1:
            break
    blob = render_blob(1, sections)
    assert limit - 1 <= word_count(blob) <= limit
    return blob


@pytest.fixture
def memory_at_limits(store):
    """Blobs at their word limits (the last section says "end of <scope>"), each scope's
    buffer one short of its consolidation threshold with reflections at their word limit,
    and a full page (the FIFO limit) of facts at theirs."""
    settings = Settings(_env_file=None)
    words = itertools.cycle(_demo_words())
    for scope, key, ids in (("agent", "agent", {}), ("user", "user:u1", {"user_id": "u1"}),
                            ("session", "session:s1", {"session_id": "s1"})):
        limit = settings.word_limit(scope)
        store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope=scope, scope_key=key, consolidated_content=
                                         f"{_blob_at_limit(words, limit - 4)}\n[LAST]\n- end of {scope}",
                                         word_limit=limit, version=1, **ids), expected_version=0)
        store.reflections.insert_reflections([
            reflection(f"{scope}-r{i}", f"{scope} reflection {i}: " + _text(words, settings.reflection_word_limit - 3),
                       scope=scope, user="u1", session="s1", formed=NOW - timedelta(hours=i + 1))
            for i in range(settings.consolidation_threshold(scope) - 1)
        ])
    for i in range(settings.facts_fifo_limit):
        store.facts.insert_fact(fact(f"f{i}", f"fact {i}: " + _text(words, settings.fact_word_limit - 2),
                               user="u1" if i % 2 else None, formed=NOW - timedelta(hours=i + 1)))
    store.leases.bump_scope_versions("a1", ["agent", "user:u1", "session:s1"])
    return store


def test_every_blob_at_its_limit_is_in_the_default_context_with_the_reflections_and_a_page_of_facts(
    memory_at_limits,
):
    service = MemoryService("a1", settings=Settings(_env_file=None), store=memory_at_limits, clock=FrozenClock(NOW))
    xml = service.get_memory_context(session_id="s1", user_id="u1")
    assert "<Omitted" not in xml
    for scope in ("agent", "user", "session"):
        assert f"end of {scope}" in xml                      # the blob's last section: the whole blob
        assert f"{scope} reflection 0:" in xml
    assert xml.count("<Consolidated>") == 3
    assert all(f"fact {i}:" in xml for i in range(40))
    assert estimate_tokens(xml) <= default_max_tokens(service.settings)


def test_a_blob_too_big_for_a_callers_budget_loses_sections_from_its_end_not_the_whole_blob(memory_at_limits):
    service = MemoryService("a1", settings=Settings(_env_file=None), store=memory_at_limits, clock=FrozenClock(NOW))
    xml = service.get_memory_context(session_id="s1", user_id="u1", max_tokens=2000)
    assert estimate_tokens(xml) <= 2000
    assert xml.count("<Consolidated>") == 3                  # the agent's blob stays, cut
    agent = xml[xml.index("<AgentMemory>"):xml.index("</AgentMemory>")]
    assert "[TOPIC 1]" in agent and "end of agent" not in agent
    assert "<RecentReflections>" not in xml and "<Facts>" not in xml
    assert 'sections="' in xml and 'blobs="' not in xml


def test_the_default_budget_follows_the_limits_it_is_derived_from():
    shipped = default_max_tokens(Settings(_env_file=None))
    assert default_max_tokens(Settings(_env_file=None, word_limit_agent=2400)) > shipped + 1200 * 5.6 / 4.5
    assert default_max_tokens(Settings(_env_file=None, facts_fifo_limit=0)) < shipped - 40 * 30 * 5.6 / 4.5
    assert default_max_tokens(Settings(_env_file=None, context_max_tokens=100)) == shipped  # a budget, not a limit


def test_a_configured_budget_is_used_instead_of_the_derived_one(memory_at_limits):
    settings = Settings(_env_file=None, context_max_tokens=1500)
    xml = MemoryService("a1", settings=settings, store=memory_at_limits, clock=FrozenClock(NOW)).get_memory_context(
        session_id="s1", user_id="u1")
    assert estimate_tokens(xml) <= 1500 and "<Omitted" in xml


def test_reading_memory_states_the_shipped_default_budget():
    page = (REPO_ROOT / "docs" / "reading.md").read_text(encoding="utf-8")
    assert f"{default_max_tokens(Settings(_env_file=None)):,} tokens\n  with the shipped settings" in page
