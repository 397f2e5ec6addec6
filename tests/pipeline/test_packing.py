"""The memory context fits its token budget: whole items, in priority order, and the rest stated."""

import re
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings as hsettings, strategies as st

from pipeline.context import FactLine, ScopeMemory, render_context
from pipeline.packing import pack_context
from pipeline.trigger import estimate_tokens

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def _facts(n: int, words: int = 8) -> list[FactLine]:
    # newest first, as the store returns them: fact 0 is one minute old, fact n-1 n minutes
    return [
        FactLine("agent", f"fact{i} " + " ".join(["word"] * words), NOW - timedelta(minutes=i + 1)) for i in range(n)
    ]


def _scopes(blob_words: int = 20, reflections: int = 3) -> list[ScopeMemory]:
    return [
        ScopeMemory(key, f"{key} blob " + " ".join(["about"] * blob_words),
                    [f"{key} reflection{j}" for j in range(reflections)])
        for key in ("agent", "user:u1", "session:s1")
    ]


def _omitted(xml: str) -> dict[str, int]:
    match = re.search(r"<Omitted ([^/]*)/>", xml)
    return {k: int(v) for k, v in re.findall(r'(\w+)="(\d+)"', match.group(1))} if match else {}


def test_a_context_within_its_budget_is_the_whole_context():
    scopes, facts = _scopes(), _facts(5)
    assert pack_context(scopes, facts, NOW, 100_000) == render_context(scopes, facts, NOW)


def test_facts_are_left_out_oldest_first_and_counted():
    scopes, facts = _scopes(), _facts(30)
    whole = estimate_tokens(render_context(scopes, facts, NOW))
    xml = pack_context(scopes, facts, NOW, int(whole * 0.7))
    assert estimate_tokens(xml) <= int(whole * 0.7)
    kept = [int(n) for n in re.findall(r"- \[agent\] fact(\d+) ", xml)]
    assert kept == list(range(len(kept)))      # the newest ones, in their order
    assert 0 < len(kept) < 30
    assert _omitted(xml) == {"facts": 30 - len(kept)}
    for key in ("agent blob", "user:u1 blob", "session:s1 blob", "reflection2"):
        assert key in xml                      # blobs and reflections come before any fact


def test_blobs_go_in_session_user_agent_order_before_reflections():
    scopes = _scopes(blob_words=60, reflections=2)
    one_blob = estimate_tokens(render_context(scopes[2:], [], NOW).replace("reflection", ""))
    xml = pack_context(scopes, [], NOW, int(one_blob * 2.2))
    assert "session:s1 blob" in xml and "user:u1 blob" in xml
    assert "agent blob" not in xml
    assert _omitted(xml)["blobs"] == 1


def test_an_item_bigger_than_the_whole_budget_is_left_out_whole_and_reported():
    huge = ScopeMemory("agent", "enormous " * 2000, ["a small reflection"])
    xml = pack_context([huge], _facts(2), NOW, 200)
    assert "enormous" not in xml
    assert "a small reflection" in xml and "fact0" in xml
    assert _omitted(xml) == {"blobs": 1}


def test_a_budget_too_small_even_for_the_note_gives_an_empty_context():
    assert pack_context(_scopes(), _facts(3), NOW, 5) == ""


@hsettings(max_examples=60, deadline=None)
@given(
    budget=st.integers(min_value=1, max_value=1500),
    n_facts=st.integers(min_value=0, max_value=25),
    fact_words=st.integers(min_value=1, max_value=40),
    blob_words=st.integers(min_value=0, max_value=300),
    reflections=st.integers(min_value=0, max_value=6),
)
def test_the_packed_context_never_exceeds_its_budget_and_loses_nothing_silently(
    budget, n_facts, fact_words, blob_words, reflections,
):
    scopes, facts = _scopes(blob_words, reflections), _facts(n_facts, fact_words)
    xml = pack_context(scopes, facts, NOW, budget)
    assert estimate_tokens(xml) <= budget
    if xml:
        shown_facts = len(re.findall(r"- \[agent\] fact\d+ ", xml))
        assert shown_facts + _omitted(xml).get("facts", 0) == n_facts
        blobs = sum(1 for s in scopes if s.consolidated.strip())
        shown_blobs = xml.count("<Consolidated>")
        assert shown_blobs + _omitted(xml).get("blobs", 0) == blobs
