"""decide_facts by rule: token similarity between a new fact and each of its candidates.

Per candidate, in this order:
- DELETE when the two share their subject (two leading words, half their words) and exactly
  one of them is negated ("not", "no longer", "cancelled"): the new fact contradicts the old
  one, which is retired, and the new one is added.
- NONE when they are equal once normalized, or differ in no value (number, email, URL, date,
  name) and share at least 75% of their words or one's words are all in the other: already
  known.
- UPDATE when they share their subject (four leading words, or three and 40% of their words,
  or two and half their words, or
  the same subject filling the same slot: where it lives, where it works, when it takes place)
  and a value changed: the new text replaces the old one (newer wins).
- ADD otherwise.
Across candidates, NONE beats DELETE beats UPDATE beats ADD; ties go to the most similar.
Decisions only ever name aliases listed under their own new fact.
"""

from __future__ import annotations

from typing import Any

from pipeline.llm.offline_rules.language import Similarity, same_slot, similarity

_RANK = {"NONE": 3, "DELETE": 2, "UPDATE": 1, "ADD": 0}


def _same_subject(sim: Similarity) -> bool:
    # A two-word name plus "is" already makes three leading words: ask for shared words too.
    return sim.prefix >= 4 or (sim.prefix >= 3 and sim.jaccard >= 0.4) or (sim.prefix >= 2 and sim.jaccard >= 0.5)


def classify(new: str, existing: str) -> str:
    """The action one candidate alone calls for."""
    sim = similarity(new, existing)
    if sim.negation_differs and sim.prefix >= 2 and sim.jaccard >= 0.5:
        return "DELETE"
    if sim.equal or (not sim.value_changed and (sim.jaccard >= 0.75 or sim.nested)):
        return "NONE"
    if sim.value_changed and (_same_subject(sim) or same_slot(new, existing)):
        return "UPDATE"
    return "ADD"


def decide(inputs: dict[str, Any]) -> dict[str, Any]:
    decisions = []
    for item in inputs.get("items") or ():
        new_text = item["text"]
        best: tuple[int, float, int] | None = None   # (rank, jaccard, alias)
        action = "ADD"
        for candidate in item.get("candidates") or ():
            verdict = classify(new_text, candidate["text"])
            key = (_RANK[verdict], similarity(new_text, candidate["text"]).jaccard, -candidate["alias"])
            if verdict != "ADD" and (best is None or key > best):
                best, action = key, verdict
        decision: dict[str, Any] = {"new": item["new"], "action": action, "existing": None, "text": None}
        if action in ("UPDATE", "DELETE") and best is not None:
            decision["existing"] = -best[2]
        if action == "UPDATE":
            decision["text"] = new_text
        decisions.append(decision)
    return {"decisions": decisions}
