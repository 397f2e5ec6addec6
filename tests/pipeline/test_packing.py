"""The memory context fits its token budget: whole items, in priority order, and the rest stated."""

import math
import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from pipeline.context import FactLine, Omitted, ScopeMemory, render_context
from pipeline.packing import blob_sections, pack_context
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


def test_nothing_of_a_lower_kind_goes_in_while_a_blob_is_left_out():
    huge = ScopeMemory("agent", "enormous " * 2000, ["a small reflection"])
    xml = pack_context([huge], _facts(2), NOW, 200)
    assert "enormous" not in xml
    assert "a small reflection" not in xml and "fact0" not in xml
    assert _omitted(xml) == {"blobs": 1, "reflections": 1, "facts": 2}


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


# ------------------------------------------------------------------ the drop order (design §6) --
def _sectioned(key: str, sections: int) -> str:
    return "VERSION: 3\n" + "\n".join(f"[{key.upper()} PART {k}]\n- {key} detail {k} " + "word " * 12
                                        for k in range(sections))


SCOPES = [
    ScopeMemory("agent", _sectioned("agent", 3), ["agent reflection old", "agent reflection new"]),
    ScopeMemory("user:u1", _sectioned("user", 2), ["user reflection"]),
    ScopeMemory("session:s1", _sectioned("session", 1), ["session reflection"]),
]
RELEVANT = [FactLine("user", "relevant fact best", NOW - timedelta(days=20)),
            FactLine("agent", "relevant fact second", NOW - timedelta(days=30))]
FACTS = _facts(3)


def _shown(sections: dict[str, int], reflections: set[str], relevant: int, facts: int) -> tuple:
    """The scopes and facts a budget should keep: the first ``sections[key]`` sections of each
    blob, the named reflections, the best ``relevant`` found facts, the newest ``facts``."""
    scopes = [
        ScopeMemory(s.scope_key, "\n".join(blob_sections(s.consolidated)[:sections[s.scope_key]]),
                    [r for r in s.reflections if r in reflections])
        for s in SCOPES
    ]
    return scopes, FACTS[:facts], RELEVANT[:relevant]


ALL_REFLECTIONS = {r for s in SCOPES for r in s.reflections}
FULL = {"agent": 3, "user:u1": 2, "session:s1": 1}


@pytest.mark.parametrize(("case", "sections", "reflections", "relevant", "facts", "omitted"), [
    ("everything fits", FULL, ALL_REFLECTIONS, 2, 3, Omitted()),
    ("the oldest recent fact goes first", FULL, ALL_REFLECTIONS, 2, 2, Omitted(facts=1)),
    ("then every recent fact", FULL, ALL_REFLECTIONS, 2, 0, Omitted(facts=3)),
    ("then the worst relevant fact", FULL, ALL_REFLECTIONS, 1, 0, Omitted(facts=3, relevant=1)),
    ("then every relevant fact", FULL, ALL_REFLECTIONS, 0, 0, Omitted(facts=3, relevant=2)),
    ("then the oldest reflection", FULL, ALL_REFLECTIONS - {"agent reflection old"}, 0, 0,
     Omitted(reflections=1, facts=3, relevant=2)),
    ("then every reflection", FULL, set(), 0, 0, Omitted(reflections=4, facts=3, relevant=2)),
    ("then the agent blob's last section", {**FULL, "agent": 2}, set(), 0, 0,
     Omitted(sections=1, reflections=4, facts=3, relevant=2)),
    ("then the last sections of every blob", {"agent": 1, "user:u1": 1, "session:s1": 1}, set(), 0, 0,
     Omitted(sections=3, reflections=4, facts=3, relevant=2)),
    ("then the agent blob, when not even its first section fits", {"agent": 0, "user:u1": 1, "session:s1": 1},
     set(), 0, 0, Omitted(blobs=1, sections=1, reflections=4, facts=3, relevant=2)),
])
def test_a_shrinking_budget_drops_facts_then_reflections_then_blob_sections(
    case, sections, reflections, relevant, facts, omitted,
):
    scopes, kept_facts, kept_relevant = _shown(sections, reflections, relevant, facts)
    expected = render_context(scopes, kept_facts, NOW, omitted, kept_relevant)
    budget = math.ceil(estimate_tokens(expected))
    assert pack_context(SCOPES, FACTS, NOW, budget, RELEVANT) == expected, case


@pytest.mark.parametrize(("text", "sections"), [
    ("", []),
    ("Alice prefers short answers.", ["Alice prefers short answers."]),
    ("VERSION: 2\n[A]\n- one\n[B]\n- two\n- three", ["VERSION: 2\n[A]\n- one", "[B]\n- two\n- three"]),
    ("notes before\n[A]\n- one", ["notes before\n[A]\n- one"]),
    ("VERSION: 1\n[A]\n[B]\n- b", ["VERSION: 1\n[A]", "[B]\n- b"]),
])
def test_a_blob_is_cut_before_each_section_header(text, sections):
    assert blob_sections(text) == sections


def _kinds_shown(xml: str) -> dict[str, int]:
    return {
        "reflections": len(re.findall(r"^    - ", xml, re.M)),
        "relevant": xml[xml.find("<RelevantFacts>"):xml.find("</RelevantFacts>")].count("\n  - ")
        if "<RelevantFacts>" in xml else 0,
        "facts": xml[xml.find("<Facts>"):xml.find("</Facts>")].count("\n  - ") if "<Facts>" in xml else 0,
    }


@hsettings(max_examples=60, deadline=None)
@given(budget=st.integers(min_value=1, max_value=600))
def test_nothing_of_a_lower_kind_is_kept_while_a_higher_kind_is_left_out(budget):
    xml = pack_context(SCOPES, FACTS, NOW, budget, RELEVANT)
    assert estimate_tokens(xml) <= budget
    if not xml:
        return
    left, shown = _omitted(xml), _kinds_shown(xml)
    order = [("sections", "blobs"), ("reflections",), ("relevant_facts",), ("facts",)]
    shown_by_rank = [None, shown["reflections"], shown["relevant"], shown["facts"]]
    for rank, names in enumerate(order):
        if any(left.get(name) for name in names):
            assert not any(shown_by_rank[rank + 1:]), (budget, xml)
    for scope in SCOPES:  # each blob shows a prefix of its sections
        kept = [k for k, text in enumerate(blob_sections(scope.consolidated)) if text.split("\n")[-1] in xml]
        assert kept == list(range(len(kept)))
