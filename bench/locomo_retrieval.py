"""Evidence recall of ``search_facts`` on LoCoMo (semantic, text and hybrid), per offline model.

    python -m bench.locomo_retrieval --data ../shared/data/locomo/dev.json --json
    python -m bench.locomo_retrieval --data ... --models all-MiniLM-L6-v2-int8

Both offline models (``MEMORY_LOCAL_EMBEDDING_MODEL``: MiniLM and multilingual e5) run side by
side in one run by default, each with its own shipped search defaults; questions are embedded
as queries (``embed_queries``: e5's ``query:`` prefix), turns as stored texts.

Setup: each conversation is its own agent; each dialog turn is one agent-scoped fact whose
content is ``[<session date>] <speaker>: <text>`` plus ``[image: <caption>]`` when the turn
shares an image. Its embedding is that of its retrieval text: the content joined to its
provenance (the date and the two turns before it in its session), budgeted in the
embedder's tokens as formation budgets it (``retrieval_text``). Only the turns are indexed (never ``observation``, ``session_summary`` or
``event_summary``). Facts are embedded by the offline local model. Each question with
evidence is searched with top_k 10 through the production ranking code
(``pipeline.retrieval.rank_query`` over ``LocalFactSearch``), with thresholds off (pure
ranking), with the production thresholds (``*_thresholded``) and with the previous defaults,
whose fused cut was the raw score 0.015 (``*_thresholded_raw``; it never acted at the local
model's k = 10); ``setup.search_ms`` is the
p50/p95 of that hybrid ranking per question (the query embedded already). Recall of a question is
the share of its evidence turns in the top k; "overall" counts every question once.

For retuning per model, from this data only: ``rrf_k_sweep`` is hybrid recall with thresholds
off at several k; ``semantic_scores`` gives, for semantic thresholds, the share of
(question, non-evidence turn) pairs that pass, and ``semantic_matching_minilm`` the score at
which each model passes the same share of non-evidence turns as MiniLM at its shipped
threshold (a model's scores have their own scale: e5's cosines sit high).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from bench.output import print_result
from pipeline.embeddings import open_embedder
from pipeline.embeddings.port import Embedder
from pipeline.retrieval import Thresholds, rank_query, retrieval_text
from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import SQLiteStore
from pipeline.text import text_hash
from schemas.documents import Fact
from schemas.settings import Settings

MODES = {"hybrid": ("semantic", "text"), "semantic": ("semantic",), "text": ("text",)}
MODELS = ("all-MiniLM-L6-v2-int8", "multilingual-e5-small-q4")
RRF_K_SWEEP = (5, 10, 20, 30, 60)
TOP_K = 10
#: turns of the source excerpt embedded with a fact (the ones just before it)
EXCERPT_TURNS = 2
#: the fused cut shipped before ``MEMORY_SEARCH_RRF_RANK``: a raw score, whatever the k
PREVIOUS_RRF_THRESHOLD = 0.015
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)


def parse_session_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware datetime (UTC, as the data has no zone)."""
    m = _DATE.search(text)
    if not m:
        raise ValueError(f"unreadable session date {text!r}")
    hour, minute, half, day, month, year = m.groups()
    hour = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    month_no = datetime.strptime(month[:3], "%b").month
    return datetime(int(year), month_no, int(day), hour, int(minute), tzinfo=timezone.utc)


def turn_content(date: str, turn: dict) -> str:
    """The fact of one turn: its date, speaker and text, and the caption of a shared image."""
    return f"[{date}] {_turn_line(turn)}"


def _turn_line(turn: dict) -> str:
    line = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        line += f" [image: {turn['blip_caption']}]"
    return line


def conversation_turns(conversation: dict, embedder: Embedder | None = None) -> list[tuple[str, str, str, datetime]]:
    """(dia_id, content, retrieval text, formed_at) of every turn of every session with turns;
    with ``embedder``, each retrieval text is budgeted in its tokens as formation does."""
    out = []
    sessions = sorted(
        (int(k.split("_")[1]), k) for k, v in conversation.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
    )
    for number, key in sessions:
        date = conversation.get(f"{key}_date_time", "")
        formed = parse_session_date(date)
        turns = conversation[key]
        for i, turn in enumerate(turns):
            excerpt = turns[max(0, i - EXCERPT_TURNS):i]
            lines = [f"{t['speaker']}: {t['text']}" for t in excerpt]
            text = retrieval_text(_turn_line(turn), excerpt=lines, date=date, embedder=embedder)
            out.append((turn["dia_id"], turn_content(date, turn), text, formed))
    return out


def evidence_ids(raw: list[str]) -> list[str]:
    """Evidence ids, with the data's few joined entries (``"D8:6; D9:17"``) split."""
    ids: list[str] = []
    for item in raw:
        ids.extend(part for part in re.split(r"[;,\s]+", item) if part)
    return list(dict.fromkeys(ids))


def data_arguments(doc: str) -> argparse.ArgumentParser:
    """The options every LoCoMo benchmark takes: ``--data`` and ``--json``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON (a list of conversations)")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    return parser


def read_conversations(tool: str, path: Path) -> list[dict] | None:
    """The conversations of a LoCoMo file, or None once ``tool`` has said on stderr why there
    are none (no such file, not JSON, not a list)."""
    if not path.is_file():
        print(f"{tool}: --data {path}: no such file", file=sys.stderr)
        return None
    try:
        conversations = json.loads(path.read_bytes())
    except ValueError as exc:  # not JSON, or not text at all
        print(f"{tool}: --data {path}: not JSON ({exc})", file=sys.stderr)
        return None
    if not isinstance(conversations, list):
        print(f"{tool}: --data {path}: a JSON {type(conversations).__name__}, not a list of conversations",
              file=sys.stderr)
        return None
    return conversations


def _summary(rows: list[tuple[int, float, float]]) -> dict:
    by_cat: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for cat, r5, r10 in rows:
        by_cat[cat].append((r5, r10))

    def avg(values: list[tuple[float, float]], i: int) -> float:
        return round(sum(v[i] for v in values) / len(values), 4) if values else 0.0

    every = [(r5, r10) for _, r5, r10 in rows]
    return {
        "recall@5": avg(every, 0), "recall@10": avg(every, 1), "questions": len(rows),
        "by_category": {
            str(c): {"recall@5": avg(v, 0), "recall@10": avg(v, 1), "questions": len(v)}
            for c, v in sorted(by_cat.items())
        },
    }


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    if not ordered:
        return {}
    return {name: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)
            for name, q in (("p50", 0.5), ("p95", 0.95))}


def _pass_rates(negatives: np.ndarray) -> dict:
    """How many non-evidence turns pass each semantic threshold, and the scores at given pass rates."""
    if not negatives.size:
        return {}
    return {
        "non_evidence_pairs": int(negatives.size),
        "pass_rate_at": {f"{t:.2f}": round(float((negatives >= t).mean()), 4) for t in np.arange(0.6, 0.96, 0.05)},
        "score_at_pass_rate": {f"{r:g}": round(float(np.quantile(negatives, 1 - r)), 4)
                               for r in (0.5, 0.2, 0.1, 0.05, 0.02, 0.01)},
        "sorted_sample": np.sort(negatives)[:: max(1, negatives.size // 2000)].round(4).tolist(),
    }


def matching_threshold(reference: dict, reference_threshold: float, other: dict) -> float | None:
    """The semantic score at which ``other`` passes the share of non-evidence pairs that
    ``reference`` passes at ``reference_threshold`` (from each model's ``semantic_scores``)."""
    ref, oth = np.asarray(reference.get("sorted_sample", [])), np.asarray(other.get("sorted_sample", []))
    if not ref.size or not oth.size:
        return None
    share = float((ref >= reference_threshold).mean())
    return round(float(np.quantile(oth, 1 - share)), 3)


def run(conversations: list[dict], settings: Settings) -> dict:
    embedder = open_embedder(settings)
    production, origin = Thresholds.resolve(settings, embedder.model)
    previous = dataclasses.replace(production, rrf=PREVIOUS_RRF_THRESHOLD, rrf_rank=None)
    variants = {"": production.off(), "_thresholded": production, "_thresholded_raw": previous}
    # for comparison: the same ranking with the §10 default k (60)
    default_k = Thresholds(None, None, None, 60, production.semantic_weight, production.text_weight)
    rows: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    latencies: list[float] = []  # hybrid with the production thresholds, query embedded already
    negatives: list[np.ndarray] = []  # each question's semantic scores of the turns that are not its evidence
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "locomo.db"))
        store.create_indexes()
        search = LocalFactSearch(store)
        for conv in conversations:
            agent, turns, vectors = _store_conversation(store, embedder, conv)
            questions = [q for q in conv["qa"] if q.get("evidence")]
            qvectors = embedder.embed_queries([q["question"] for q in questions]).vectors
            turn_ids = [f"{agent}:{dia_id}" for dia_id, _, _, _ in turns]
            scores = (1 + np.asarray(qvectors, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T) / 2
            for q, qvec, row in zip(questions, qvectors, scores):
                wanted = {f"{agent}:{e}" for e in evidence_ids(q["evidence"])}
                negatives.append(row[[i for i, t in enumerate(turn_ids) if t not in wanted]])
                _rank_question(search, agent, embedder.model, q["question"], qvec, wanted, int(q["category"]),
                               production, variants, default_k, rows, latencies)
        store.close()
    out = {key: _summary(rows[key]) for key in (m + s for s in variants for m in MODES)}
    out["hybrid_k60"] = _summary(rows["hybrid_k60"])
    out["rrf_k_sweep"] = {str(k): _summary(rows[f"k{k}"]) for k in RRF_K_SWEEP}
    out["semantic_scores"] = _pass_rates(np.concatenate(negatives) if negatives else np.zeros(0))
    out["setup"] = {
        "conversations": len(conversations), "embedding_model": embedder.model, "top_k": TOP_K,
        "rrf_k": production.rrf_k, "weights": {"semantic": production.semantic_weight, "text": production.text_weight},
        "thresholds": production.describe(), "previous_thresholds": previous.describe(),
        "defaults_used": origin,
        "seconds": round(time.perf_counter() - started, 1),
        "search_ms": _percentiles(latencies), "load_average": os.getloadavg(),
    }
    return out



def _store_conversation(store: SQLiteStore, embedder, conv: dict) -> tuple[str, list, list]:
    """Every turn of a conversation as an agent fact of its own agent: (agent, turns, vectors)."""
    agent = f"locomo-{conv['sample_id']}"
    turns = conversation_turns(conv["conversation"], embedder)
    vectors = embedder.embed([text for _, _, text, _ in turns]).vectors
    for (dia_id, content, _, formed), vector in zip(turns, vectors):
        store.facts.insert_fact(Fact(
            fact_id=f"{agent}:{dia_id}", agent_id=agent, scope="agent", scope_key="agent",
            content=content, hash=text_hash(f"{dia_id} {content}"), embedding=vector,
            embedding_model=embedder.model, formed_at=formed,
        ))
    store.leases.bump_scope_versions(agent, ["agent"])
    return agent, turns, vectors


def _rank_question(search, agent: str, model: str, question: str, qvec, wanted: set[str], category: int,
                   production: Thresholds, variants: dict, default_k: Thresholds,
                   rows: dict[str, list[tuple[int, float, float]]], latencies: list[float]) -> None:
    """One question ranked every way the report compares: its recall rows, and the latency of
    the production ranking."""
    for k in RRF_K_SWEEP:
        swept = Thresholds(None, None, None, k, production.semantic_weight, production.text_weight)
        fused, _ = rank_query(search, agent, ["agent"], model, question, qvec, TOP_K, swept)
        found = [f.fact_id for f in fused]
        rows[f"k{k}"].append((category, len(wanted & set(found[:5])) / len(wanted),
                              len(wanted & set(found)) / len(wanted)))
    for mode, signals in MODES.items():
        for suffix, limits in variants.items():
            fused, _ = rank_query(
                search, agent, ["agent"], model, question, qvec, TOP_K, limits, signals,
            )
            found = [f.fact_id for f in fused]
            r5 = len(wanted & set(found[:5])) / len(wanted)
            r10 = len(wanted & set(found[:10])) / len(wanted)
            rows[mode + suffix].append((category, r5, r10))
    t0 = time.perf_counter()
    fused, _ = rank_query(search, agent, ["agent"], model, question, qvec, TOP_K, production)
    latencies.append(time.perf_counter() - t0)
    fused, _ = rank_query(search, agent, ["agent"], model, question, qvec, TOP_K, default_k)
    found = [f.fact_id for f in fused]
    rows["hybrid_k60"].append((
        category, len(wanted & set(found[:5])) / len(wanted), len(wanted & set(found)) / len(wanted),
    ))


def main(argv: list[str] | None = None) -> int:
    parser = data_arguments(__doc__)
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"offline models to run side by side, comma-separated (default: {','.join(MODELS)})")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        print(f"locomo_retrieval: --models: unknown {unknown or 'nothing'}; use {', '.join(MODELS)}", file=sys.stderr)
        return 2
    conversations = read_conversations("locomo_retrieval", args.data)
    if conversations is None:
        return 2
    # the shipped search defaults (pipeline.search.defaults); MEMORY_SEARCH_* variables override
    result: dict = {}
    for model in models:
        result[model] = run(conversations, Settings(embedding_provider="local", local_embedding_model=model))
    first = result[models[0]]
    matching = {m: matching_threshold(first["semantic_scores"], first["setup"]["thresholds"]["semantic"],
                                      result[m]["semantic_scores"]) for m in models}
    result["semantic_matching_" + models[0]] = matching
    for m in models:
        result[m]["semantic_scores"].pop("sorted_sample", None)  # used for the matching only
    keys = (*(m + s for s in ("", "_thresholded", "_thresholded_raw") for m in MODES), "hybrid_k60")
    lines = [f"{'':22s} " + "  ".join(f"{m[:24]:>26s}" for m in models)]
    for key in keys:
        lines.append(f"{key:22s} " + "  ".join(
            f"R@5 {result[m][key]['recall@5']:.3f} R@10 {result[m][key]['recall@10']:.3f}" for m in models))
    for k in RRF_K_SWEEP:
        lines.append(f"{'hybrid, off, k=' + str(k):22s} " + "  ".join(
            f"R@5 {result[m]['rrf_k_sweep'][str(k)]['recall@5']:.3f} R@10 {result[m]['rrf_k_sweep'][str(k)]['recall@10']:.3f}"
            for m in models))
    for m in models:
        lines.append(f"{m}: thresholds {result[m]['setup']['thresholds']}; semantic score passing as many "
                     f"non-evidence turns as {models[0]}'s: {matching[m]}")
        lines.extend(f"  {key}: {where}" for key, where in sorted(result[m]["setup"]["defaults_used"].items()))
    lines.append(f"load average {os.getloadavg()}")
    return print_result(result, lines, json_only=args.json)


if __name__ == "__main__":
    sys.exit(main())
