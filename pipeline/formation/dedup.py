"""The dedup decision of decide_facts (SPEC §5.3). Pure, apart from the search port it is given.

1. ``gather_candidates``: per new fact, the live facts of the same agent, the same scope key
   (``user:<id>`` covers "same user") and the same embedding model, semantic score >= the
   dedup threshold, at most N, found through the search port, in parallel.
2. ``build_batch``: facts with candidates go to one LLM call; the model sees integer aliases
   only (one alias space for existing facts across the batch).
3. ``validate``: one decision per new fact; a decision that names an alias outside that fact's
   candidates (or lacks the alias/text its action needs) raises ``InvalidLLMAnswer`` so the
   call is asked again, never half-applied.
4. ``resolve`` + ``plan_effects``: decisions become store effects keyed by the run id, so
   reapplying them after a crash changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from pipeline.errors import InvalidLLMAnswer
from pipeline.formation.facts import NewFact
from pipeline.prompts.dedup import DecisionsAnswer, FactDecision
from pipeline.search.port import FactSearch
from pipeline.text import text_hash, word_count

ACTIONS = ("ADD", "UPDATE", "DELETE", "NONE")


@dataclass(frozen=True)
class Candidate:
    fact_id: str
    content: str
    score: float


def gather_candidates(
    search: FactSearch,
    get_contents: Callable[[Sequence[str]], Mapping[str, str]],
    agent_id: str,
    facts: Sequence[NewFact],
    vectors: Mapping[int, Sequence[float]],
    embedding_model: str,
    *,
    min_score: float,
    limit: int,
) -> dict[int, list[Candidate]]:
    """Candidates per new fact index (facts without any map to an empty list)."""

    def one(fact: NewFact) -> list[tuple[str, float]]:
        hits = search.semantic(agent_id, [fact.scope_key], embedding_model, vectors[fact.index], limit, min_score)
        return [(h.fact_id, h.score) for h in hits if h.score >= min_score][:limit]

    if len(facts) > 1:
        with ThreadPoolExecutor(max_workers=min(8, len(facts))) as pool:
            found = dict(zip((f.index for f in facts), pool.map(one, facts)))
    else:
        found = {f.index: one(f) for f in facts}
    ids = sorted({fid for hits in found.values() for fid, _ in hits})
    contents = get_contents(ids) if ids else {}
    return {
        index: [Candidate(fid, contents[fid], score) for fid, score in hits if fid in contents]
        for index, hits in found.items()
    }


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
    text: str | None = None           # merged text of an UPDATE

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Resolved:
    decisions: list[Decision]
    update_over_limit: int = 0


def resolve(
    facts: Sequence[NewFact],
    exact: Mapping[int, str],
    batch: DedupBatch,
    decided: Mapping[int, FactDecision],
    word_limit: int,
    *,
    dedup_enabled: bool = True,
) -> Resolved:
    """Every new fact's final decision, in fact order.

    - an exact duplicate (same hash in the scope key) is NONE, without the LLM;
    - a fact without candidates (or with dedup off) is ADD;
    - an UPDATE whose merged text is over the word limit is dropped (counted) and the new fact
      ADDed instead; one existing fact is changed at most once per run (a later UPDATE/DELETE
      of the same fact becomes an ADD), so nothing is lost.
    """
    by_index = {idx: alias for alias, idx in enumerate(batch.indexes)}
    out = Resolved([])
    touched: set[str] = set()
    for fact in facts:
        if fact.index in exact:
            out.decisions.append(Decision(fact.index, "NONE", "exact", exact[fact.index]))
            continue
        alias = by_index.get(fact.index)
        if not dedup_enabled or alias is None:
            out.decisions.append(Decision(fact.index, "ADD", "dedup_off" if not dedup_enabled else "no_candidates"))
            continue
        d = decided[alias]
        existing = batch.alias_ids.get(d.existing) if d.existing is not None else None
        if d.action in ("ADD", "NONE"):
            out.decisions.append(Decision(fact.index, d.action, "llm"))
        elif existing in touched:
            out.decisions.append(Decision(fact.index, "ADD", "existing_already_changed"))
        elif d.action == "UPDATE" and word_count(d.text or "") > word_limit:
            out.update_over_limit += 1
            out.decisions.append(Decision(fact.index, "ADD", "update_over_limit"))
        else:
            touched.add(existing)  # type: ignore[arg-type]
            text = " ".join((d.text or "").split()) if d.action == "UPDATE" else None
            out.decisions.append(Decision(fact.index, d.action, "llm", existing, text))
    return out


def plan_effects(run_id: str, facts: Sequence[NewFact], decisions: Sequence[Decision]) -> list[dict]:
    """Store effects, each idempotent for ``run_id``: insert (deterministic id), update, retire."""
    by_index = {f.index: f for f in facts}
    effects: list[dict] = []
    for d in decisions:
        fact = by_index[d.index]
        if d.action == "DELETE":
            effects.append({"op": "retire", "fact_id": d.existing_id, "index": d.index})
        if d.action in ("ADD", "DELETE"):
            effects.append({
                "op": "insert", "fact_id": new_fact_id(run_id, d.index), "index": d.index,
                "text": fact.text, "scope": fact.scope, "scope_key": fact.scope_key, "hash": fact.hash,
            })
        elif d.action == "UPDATE":
            effects.append({
                "op": "update", "fact_id": d.existing_id, "index": d.index,
                "text": d.text, "hash": text_hash(d.text or ""), "scope_key": fact.scope_key,
            })
    return effects


def new_fact_id(run_id: str, index: int) -> str:
    return f"{run_id}:{index}"


def action_counts(decisions: Sequence[Decision]) -> dict[str, int]:
    counts = {a.lower(): 0 for a in ACTIONS}
    for d in decisions:
        counts[d.action.lower()] += 1
    return {"added": counts["add"], "updated": counts["update"], "deleted": counts["delete"], "none": counts["none"]}
