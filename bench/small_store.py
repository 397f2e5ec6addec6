"""Do small stores find exact terms? Hit rate of ``search_facts`` ranking on 5-, 20- and 100-fact stores.

    python -m bench.small_store --data ../shared/data/locomo/dev.json --json

Setup: the facts are LoCoMo's ``observation`` items (one sentence each, written from one
turn), grouped per speaker into stores of N facts in conversation order (each store is its
own agent's facts, as one user's would be). Each fact is embedded as formation embeds it: its retrieval text (the fact behind
the date and its turn with the two turns before it, ``pipeline.retrieval.retrieval_text``,
within the local model's window). Each question with evidence is asked of every store that
holds a fact written from one of its evidence turns (a *target*), in two forms:

- ``full``: the question as written;
- ``entity``: its key entity alone, i.e. the question's word whose index term occurs in a
  target and in the fewest facts of the store (ties to the longer word).

A question *hits* when a target is among the top 10 with the production thresholds
(``pipeline.retrieval.rank_query``, hybrid, the shipped defaults). ``entity_unique`` counts
the entity questions whose term occurs in no fact but the targets: an exact distinctive term,
which should always find its fact.

The last line printed is one JSON object (with the load average).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.locomo_retrieval import data_arguments, evidence_ids, parse_session_date, read_conversations
from bench.output import print_result
from pipeline.embeddings import open_embedder
from pipeline.retrieval import Thresholds, rank_query, retrieval_text
from pipeline.search import scoring
from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import SQLiteStore
from pipeline.text import text_hash
from schemas.documents import Fact
from schemas.settings import Settings

SIZES = (5, 20, 100)
TOP_K = 10
EXCERPT_TURNS = 2


def observation_facts(conversation: dict, observations: dict) -> dict[str, list[dict]]:
    """Per speaker, their observation facts in session order: text, evidence turn ids and
    the retrieval text (date, the turn and the two before it, the fact)."""
    turns: dict[str, tuple[list[dict], int, str]] = {}
    for key, value in conversation.items():
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list):
            date = conversation.get(f"{key}_date_time", "")
            for i, turn in enumerate(value):
                turns[turn["dia_id"]] = (value, i, date)
    per_speaker: dict[str, list[dict]] = defaultdict(list)
    ordered = sorted(observations, key=lambda k: int(re.findall(r"\d+", k)[0]))
    for key in ordered:
        for speaker, items in observations[key].items():
            for text, evidence in items:
                ids = [e for e in evidence_ids([evidence] if isinstance(evidence, str) else evidence) if e in turns]
                if not ids:
                    continue
                session, at, date = turns[ids[0]]
                lines = [f"{t['speaker']}: {t['text']}" for t in session[max(0, at - EXCERPT_TURNS):at + 1]]
                per_speaker[speaker].append({"text": text, "evidence": set(ids), "excerpt": lines, "date": date})
    return per_speaker


def key_entity(question: str, targets: list[str], df: dict[str, int]) -> tuple[str, int] | None:
    """The question's word whose term is in a target and in the fewest facts, and that count."""
    target_terms = {t for text in targets for t in scoring.tokenize(text)}
    best: tuple[int, int, str] | None = None
    for word in scoring.words(question):
        terms = scoring.tokenize(word)
        if len(terms) != 1 or terms[0] not in target_terms:
            continue
        candidate = (df.get(terms[0], 0), -len(word), word)
        if best is None or candidate < best:
            best = candidate
    return (best[2], best[0]) if best else None


@dataclass(frozen=True)
class Asked:
    """One question asked of one small store, with the facts that answer it."""

    size: int
    agent: str
    form: str                 # "full" or "entity"
    text: str
    vector: list[float]
    targets: frozenset[str]   # fact ids written from an evidence turn
    unique: bool              # an entity whose term is in no fact but the targets


def asked_questions(conversations: list[dict], embedder, store: SQLiteStore) -> Iterator[Asked]:
    """Builds every small store in ``store`` (one agent each) and yields each question asked
    of it, in both forms, the query embedded (each distinct text once)."""
    vectors: dict[str, list[float]] = {}

    def vector(text: str) -> list[float]:
        if text not in vectors:
            vectors[text] = embedder.embed([text]).vectors[0]
        return vectors[text]

    for conv in conversations:
        per_speaker = observation_facts(conv["conversation"], conv.get("observation", {}))
        questions = [q for q in conv["qa"] if q.get("evidence")]
        for speaker, facts in per_speaker.items():
            texts = [retrieval_text(f["text"], excerpt=f["excerpt"], date=f["date"], embedder=embedder) for f in facts]
            fact_vectors = embedder.embed(texts).vectors
            for size in SIZES:
                for start in range(0, len(facts), size):
                    chunk = list(range(start, min(start + size, len(facts))))
                    agent = f"small-{conv['sample_id']}-{speaker}-{size}-{start}"
                    df: dict[str, int] = defaultdict(int)
                    for i in chunk:
                        store.facts.insert_fact(Fact(
                            fact_id=f"{agent}:{i}", agent_id=agent, scope="agent", scope_key="agent",
                            content=facts[i]["text"], hash=text_hash(f"{i} {facts[i]['text']}"),
                            embedding=fact_vectors[i], embedding_model=embedder.model,
                            formed_at=parse_session_date(facts[i]["date"]),
                        ))
                        for term in set(scoring.tokenize(facts[i]["text"])):
                            df[term] += 1
                    store.leases.bump_scope_versions(agent, ["agent"])
                    for q in questions:
                        wanted = set(evidence_ids(q["evidence"]))
                        targets = [i for i in chunk if facts[i]["evidence"] & wanted]
                        if not targets:
                            continue
                        ids = frozenset(f"{agent}:{i}" for i in targets)
                        yield Asked(size, agent, "full", q["question"], vector(q["question"]), ids, False)
                        entity = key_entity(q["question"], [facts[i]["text"] for i in targets], df)
                        if entity:
                            yield Asked(size, agent, "entity", entity[0], vector(entity[0]), ids, entity[1] <= len(targets))


def run(conversations: list[dict], settings: Settings) -> dict:
    embedder = open_embedder(settings)
    limits, origin = Thresholds.resolve(settings, embedder.model)
    hits: dict[str, list[int]] = defaultdict(list)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "small.db"))
        store.create_indexes()
        search = LocalFactSearch(store)
        for asked in asked_questions(conversations, embedder, store):
            fused, _ = rank_query(search, asked.agent, ["agent"], embedder.model, asked.text, asked.vector, TOP_K, limits)
            hit = int(any(f.fact_id in asked.targets for f in fused))
            hits[f"{asked.size}/{asked.form}"].append(hit)
            if asked.unique:
                hits[f"{asked.size}/entity_unique"].append(hit)
        store.close()
    out: dict = {}
    for size in SIZES:
        out[str(size)] = {
            form: {"hit_rate": round(sum(v) / len(v), 4) if v else None, "questions": len(v)}
            for form in ("full", "entity", "entity_unique") for v in [hits.get(f"{size}/{form}", [])]
        }
    out["setup"] = {
        "embedding_model": embedder.model, "top_k": TOP_K, "defaults_used": origin,
        "thresholds": limits.describe(),
        "seconds": round(time.perf_counter() - started, 1), "load_average": os.getloadavg(),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    args = data_arguments(__doc__).parse_args(argv)
    conversations = read_conversations("small_store", args.data)
    if conversations is None:
        return 2
    result = run(conversations, Settings(embedding_provider="local"))
    rows = ((size, result[str(size)]) for size in SIZES)
    return print_result(result, (f"{size:4d} facts  " + "  ".join(
        f"{form} {row[form]['hit_rate']} ({row[form]['questions']} q)" for form in row) for size, row in rows),
        json_only=args.json)


if __name__ == "__main__":
    sys.exit(main())
