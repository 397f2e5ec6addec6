"""The dedup decision of decide_facts (design §5.3). Pure.

1. Candidates (``pipeline.formation.candidates``): per new fact, the stored facts and the
   run's earlier new facts of the same scope key whose content is close to its content.
2. ``build_batch``: facts with candidates go to one LLM call; the model sees integer aliases
   only (one alias space for existing facts across the batch).
3. ``validate``: one decision per new fact; a decision that names an alias outside that fact's
   candidates (or lacks the alias/text its action needs) raises ``InvalidLLMAnswer`` so the
   call is asked again, never half-applied.
4. ``resolve`` + ``plan_effects``: decisions become store effects keyed by the run id, so
   reapplying them after a crash changes nothing. A decision naming an earlier fact of the
   same run acts on that fact's own decision: NONE drops the later fact (counted), UPDATE
   merges it into the earlier one, which is added with the merged text (counted), DELETE
   leaves the earlier one out and adds the later (counted); where the earlier fact is not
   being added (it was known already, or merged into a stored fact), the later one is added,
   so nothing said is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from pipeline.errors import InvalidLLMAnswer
from pipeline.formation.candidates import Candidate, new_fact_id
from pipeline.formation.facts import NewFact
from pipeline.prompts.dedup import DecisionsAnswer, FactDecision
from pipeline.text import text_hash, word_count

ACTIONS = ("ADD", "UPDATE", "DELETE", "NONE")


@dataclass
class DedupBatch:
    """What the one batched LLM call sees, and how its aliases map back."""

    indexes: list[int] = field(default_factory=list)           # new alias -> NewFact.index
    texts: list[str] = field(default_factory=list)             # new alias -> text
    candidates: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # new alias -> (alias, text)
    alias_ids: dict[int, str] = field(default_factory=dict)    # existing alias -> fact id

    def __bool__(self) -> bool:
        return bool(self.indexes)


def build_batch(facts: Sequence[NewFact], candidates: Mapping[int, Sequence[Candidate]]) -> DedupBatch:
    batch = DedupBatch()
    id_alias: dict[str, int] = {}
    for fact in facts:
        found = candidates.get(fact.index) or []
        if not found:
            continue
        alias = len(batch.indexes)
        batch.indexes.append(fact.index)
        batch.texts.append(fact.text)
        pairs = []
        for cand in found:
            if cand.fact_id not in id_alias:
                id_alias[cand.fact_id] = len(id_alias)
                batch.alias_ids[id_alias[cand.fact_id]] = cand.fact_id
            pairs.append((id_alias[cand.fact_id], cand.content))
        batch.candidates[alias] = pairs
    return batch


def validate(answer: DecisionsAnswer, batch: DedupBatch) -> dict[int, FactDecision]:
    """One valid decision per new alias, or ``InvalidLLMAnswer`` naming what is wrong."""
    decided: dict[int, FactDecision] = {}
    problems: list[str] = []
    for d in answer.decisions:
        if d.new not in batch.candidates:
            problems.append(f"decision names new fact {d.new}, which is not in the batch")
        elif d.new in decided:
            problems.append(f"new fact {d.new} has more than one decision")
        elif d.action in ("UPDATE", "DELETE") and d.existing is None:
            problems.append(f"{d.action} of new fact {d.new} names no existing fact")
        elif d.action in ("UPDATE", "DELETE") and d.existing not in {a for a, _ in batch.candidates[d.new]}:
            problems.append(f"{d.action} of new fact {d.new} names existing {d.existing}, not one of its candidates")
        elif d.action == "UPDATE" and not (d.text or "").strip():
            problems.append(f"UPDATE of new fact {d.new} has no merged text")
        else:
            decided[d.new] = d
    missing = sorted(set(batch.candidates) - set(decided) - {d.new for d in answer.decisions})
    if missing:
        problems.append(f"no decision for new fact(s) {missing}")
    if problems:
        raise InvalidLLMAnswer("decide_facts answer rejected: " + "; ".join(problems))
    return decided


@dataclass(frozen=True)
class Decision:
    index: int
    action: str                       # ADD, UPDATE, DELETE, NONE
    reason: str                       # exact, no_candidates, dedup_off, llm, ...
    existing_id: str | None = None
    text: str | None = None           # merged text of an UPDATE, or of an ADD that took in a
                                      # later fact of the same run

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Resolved:
    decisions: list[Decision]
    update_over_limit: int = 0
    #: later near-duplicates of the same run: dropped (NONE), merged into the earlier fact
    #: (UPDATE), or replacing it (DELETE)
    same_run: dict[str, int] = field(default_factory=lambda: {"dropped": 0, "merged": 0, "superseded": 0})


def resolve(
    facts: Sequence[NewFact],
    exact: Mapping[int, str],
    batch: DedupBatch,
    decided: Mapping[int, FactDecision],
    word_limit: int,
    *,
    dedup_enabled: bool = True,
    same_run: Mapping[str, int] | None = None,
) -> Resolved:
    """Every new fact's final decision, in fact order.

    - an exact duplicate (same hash in the scope key) is NONE, without the LLM;
    - a fact without candidates (or with dedup off) is ADD;
    - an UPDATE whose merged text is over the word limit is dropped (counted) and the new fact
      ADDed instead; one existing fact is changed at most once per run: of two UPDATEs of it
      the later carries the update and the earlier is merged into it (``_on_changed``), any
      other later UPDATE/DELETE of the same fact becomes an ADD, so nothing is lost;
    - ``same_run`` maps the candidate ids that stand for earlier new facts of this run to their
      index: a decision naming one acts on that fact's decision (see the module docstring).
    """
    same_run = same_run or {}
    by_index = {idx: alias for alias, idx in enumerate(batch.indexes)}
    out = Resolved([])
    position: dict[int, int] = {}   # new fact index -> its place in out.decisions
    touched: dict[str, int] = {}   # stored fact id -> the new fact index whose decision changes it

    def decide(decision: Decision) -> None:
        position[decision.index] = len(out.decisions)
        out.decisions.append(decision)

    for fact in facts:
        if fact.index in exact:
            decide(Decision(fact.index, "NONE", "exact", exact[fact.index]))
            continue
        alias = by_index.get(fact.index)
        if not dedup_enabled or alias is None:
            decide(Decision(fact.index, "ADD", "dedup_off" if not dedup_enabled else "no_candidates"))
            continue
        d = decided[alias]
        existing = batch.alias_ids.get(d.existing) if d.existing is not None else None
        if d.action == "NONE" and any(fid in same_run for _, fid in _named(batch, alias)):
            out.same_run["dropped"] += 1
            decide(Decision(fact.index, "NONE", "same_run_duplicate"))
        elif d.action in ("ADD", "NONE"):
            decide(Decision(fact.index, d.action, "llm"))
        elif d.action == "UPDATE" and word_count(d.text or "") > word_limit:
            out.update_over_limit += 1
            decide(Decision(fact.index, "ADD", "update_over_limit"))
        elif existing in same_run:
            decide(_on_same_run(out, position, same_run, fact.index, d, existing))
        elif existing in touched:
            decide(_on_changed(out, position, touched, fact.index, d, existing))
        else:
            touched[existing] = fact.index  # type: ignore[index]
            text = " ".join((d.text or "").split()) if d.action == "UPDATE" else None
            decide(Decision(fact.index, d.action, "llm", existing, text))
    return out


def _on_changed(
    out: Resolved, position: Mapping[int, int], touched: dict[str, int], later: int, d: FactDecision,
    existing_id: str,
) -> Decision:
    """A second decision of the run about one stored fact (its effects are applied once per
    run). Two UPDATEs: the later statement carries the update (its text, said last) and the
    earlier one is merged into it, so that no superseded value of a slot stays live ("lives in
    Lyon" stored, then "Porto" and "Nice" in one conversation). Otherwise the later fact is
    added as said."""
    at = position[touched[existing_id]]
    previous = out.decisions[at]
    if d.action != "UPDATE" or previous.action != "UPDATE":
        return Decision(later, "ADD", "existing_already_changed")
    out.same_run["merged"] += 1
    out.decisions[at] = Decision(previous.index, "NONE", "merged_into_later_update", existing_id)
    touched[existing_id] = later
    return Decision(later, "UPDATE", "llm", existing_id, " ".join((d.text or "").split()))


def _named(batch: DedupBatch, alias: int) -> list[tuple[int, str]]:
    """(candidate alias, fact id) of the candidates shown under one new alias."""
    return [(a, batch.alias_ids[a]) for a, _ in batch.candidates.get(alias, ())]


def _on_same_run(
    out: Resolved, position: Mapping[int, int], same_run: Mapping[str, int], later: int, d: FactDecision,
    earlier_id: str,
) -> Decision:
    """The later fact's decision when the model's UPDATE or DELETE names an earlier fact of the
    same run; the earlier fact's decision changes with it when it is to be added (as said, or
    merged). A fact already merged into another one stands for that one: a third value of a
    slot ("lives in Lyon", "Porto", "Nice") merges into what the first two became."""
    previous = out.decisions[position[same_run[earlier_id]]]
    while previous.reason == "merged_into_same_run" and previous.existing_id in same_run:
        earlier_id = previous.existing_id
        previous = out.decisions[position[same_run[earlier_id]]]
    earlier, at = previous.index, position[previous.index]
    if previous.action != "ADD" or (previous.text is not None and previous.reason != "merged_same_run"):
        return Decision(later, "ADD", "same_run_not_added")
    if d.action == "UPDATE":
        out.same_run["merged"] += 1
        out.decisions[at] = Decision(earlier, "ADD", "merged_same_run", text=" ".join((d.text or "").split()))
        return Decision(later, "NONE", "merged_into_same_run", earlier_id)
    out.same_run["superseded"] += 1
    out.decisions[at] = Decision(earlier, "NONE", "superseded_same_run", None)
    return Decision(later, "ADD", "supersedes_same_run")


def plan_effects(
    run_id: str, facts: Sequence[NewFact], decisions: Sequence[Decision], versions: Mapping[str, int] | None = None,
) -> list[dict]:
    """Store effects, each idempotent for ``run_id``: insert (deterministic id), update, retire.
    An update or retire carries the ``version`` of the stored fact its decision was about
    (``versions``), so that it changes nothing if another run changed that fact since."""
    by_index = {f.index: f for f in facts}
    versions = versions or {}
    effects: list[dict] = []
    for d in decisions:
        fact = by_index[d.index]
        if d.action == "DELETE":
            effects.append({"op": "retire", "fact_id": d.existing_id, "index": d.index,
                            "version": versions.get(d.existing_id or "")})
        if d.action in ("ADD", "DELETE"):
            text = d.text or fact.text  # an ADD that took in a later fact of the run is merged
            effects.append({
                "op": "insert", "fact_id": new_fact_id(run_id, d.index), "index": d.index,
                "text": text, "scope": fact.scope, "scope_key": fact.scope_key, "hash": text_hash(text),
            })
        elif d.action == "UPDATE":
            effects.append({
                "op": "update", "fact_id": d.existing_id, "index": d.index,
                "text": d.text, "hash": text_hash(d.text or ""), "scope_key": fact.scope_key,
                "version": versions.get(d.existing_id or ""),
            })
    return effects


def action_counts(decisions: Sequence[Decision]) -> dict[str, int]:
    counts = {a.lower(): 0 for a in ACTIONS}
    for d in decisions:
        counts[d.action.lower()] += 1
    return {"added": counts["add"], "updated": counts["update"], "deleted": counts["delete"], "none": counts["none"]}
