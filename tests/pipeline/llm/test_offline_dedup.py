"""Offline decide_facts: similarity decides NONE, UPDATE, DELETE or ADD, with given aliases only."""

from __future__ import annotations

import pytest

from pipeline.llm.offline import OfflineLLM
from pipeline.prompts.dedup import DecisionsAnswer, build_dedup_request


def decide(new_facts, candidates):
    response = OfflineLLM().complete(build_dedup_request(new_facts, candidates, model="fast"))
    assert isinstance(response.parsed, DecisionsAnswer)
    return response.parsed.decisions


@pytest.mark.parametrize(
    ("new", "existing", "action"),
    [
        # already known: the same words, or nearly, with no value changed
        ("Alice's email is alice@example.com", "Alice's email is alice@example.com.", "NONE"),
        ("alice's EMAIL is  alice@example.com", "Alice's email is alice@example.com", "NONE"),
        ("Alice's email address is alice@example.com", "Alice's email is alice@example.com", "NONE"),
        ("The Mars Festival takes place in Tucson", "The Mars Festival takes place in Tucson", "NONE"),
        ("Alice's email is still alice@example.com", "Alice's email is alice@example.com", "NONE"),
        ("Alice lives in Denver", "Alice lives in Denver with her two cats and her partner", "NONE"),
        # the same subject with a changed value: newer wins
        ("Alice's email is alice@new.example.com", "Alice's email is alice@example.com", "UPDATE"),
        ("Alice's email is now alice@new.example.com", "Alice's email is alice@example.com", "UPDATE"),
        ("The Mars Festival budget is $65,000", "The Mars Festival budget is $50,000", "UPDATE"),
        ("Alice lives in Boston", "Alice lives in Denver", "UPDATE"),
        ("The festival takes place on June 21", "The festival takes place on June 14", "UPDATE"),
        ("Maya Chen moved from Lisbon to Porto last weekend", "Maya Chen lives in Lisbon", "UPDATE"),
        ("Alice joined Google in 2024", "Alice works at NASA", "UPDATE"),
        ("The launch event was moved to March 21", "The launch event is on March 14 in Lisbon", "UPDATE"),
        # a contradiction retires the old fact
        ("The Mars Festival is no longer in Tucson", "The Mars Festival is in Tucson", "DELETE"),
        ("Alice is not vegan", "Alice is vegan", "DELETE"),
        # new information
        ("Alice works at NASA", "Alice lives in Denver", "ADD"),
        ("Bob's email is bob@example.com", "Alice's email is alice@example.com", "ADD"),
        ("Alice has two dogs", "Alice has two kids", "ADD"),
        ("Bob moved to Porto", "Alice lives in Lisbon", "ADD"),
        ("Maya Chen is vegetarian", "Maya Chen is the product manager at Lumen Labs", "ADD"),
        ("Alice's sister lives in Porto", "Alice lives in Lisbon", "ADD"),
    ],
)
def test_one_candidate_decides_by_similarity(new, existing, action):
    [decision] = decide([new], {0: [(5, existing)]})
    assert (decision.new, decision.action) == (0, action)
    assert decision.existing == (5 if action in ("UPDATE", "DELETE") else None)
    assert decision.text == (new if action == "UPDATE" else None)


def test_the_best_candidate_is_chosen_and_only_given_aliases_are_named():
    new = ["Alice's email is alice@new.example.com", "Alice works at NASA"]
    candidates = {
        0: [(3, "Alice lives in Denver"), (9, "Alice's email is alice@example.com")],
        1: [(3, "Alice lives in Denver"), (4, "Alice works at NASA.")],
    }
    decisions = decide(new, candidates)
    assert [(d.new, d.action, d.existing) for d in decisions] == [(0, "UPDATE", 9), (1, "NONE", None)]
    for d in decisions:
        assert d.existing is None or d.existing in {a for a, _ in candidates[d.new]}


def test_already_known_beats_an_update_from_another_candidate():
    [decision] = decide(["Alice lives in Boston"], {0: [(1, "Alice lives in Denver"), (2, "Alice lives in Boston")]})
    assert decision.action == "NONE"


def test_there_is_exactly_one_decision_per_new_fact_in_alias_order():
    new = [f"Fact number {i} is about Mars" for i in range(6)]
    decisions = decide(new, {i: [(100 + i, f"Fact number {i} is about Venus")] for i in range(6)})
    assert [d.new for d in decisions] == list(range(6))
