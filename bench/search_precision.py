"""How much of what ``search_facts`` returns is evidence? Hits per query and the evidence share,
with the previous defaults beside the shipped ones, in one run.

    python -m bench.search_precision --data ../shared/data/locomo/dev.json --json

Two sets of questions whose answers are known:

- ``small_store``: the questions of ``bench.small_store`` (LoCoMo's questions asked of the
  5-, 20- and 100-fact stores holding one of their evidence facts, as written and as their key
  entity); a hit is evidence when it was written from one of the question's evidence turns.
- ``demo``: the demo conversation (``ops/demo_data``) formed as ``make demo`` forms it (the
  offline LLM rules and the local embedder, in a subprocess), then the questions of
  ``DEMO_QUESTIONS`` asked through ``pipeline.retrieval.search_facts`` in their session as
  their user (visibility as in production, no access recorded). Each question names the
  pattern of the facts that answer it; a question that no stored fact answers (``answer``
  None) shows the noise a search returns when memory holds nothing relevant.

Each question runs with top_k 10 under two settings: ``previous`` (the fused cut as the raw
score 0.015, which never acted at the local model's RRF k of 10) and ``shipped`` (the
defaults as they are, ``pipeline.search.defaults`` and ``schemas.settings``). Reported per
set: questions, hits per query (mean, and the largest), the share of hits that are evidence,
and the share of questions with at least one evidence hit (hit rate). The last line printed
is one JSON object, with the load average.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.locomo_retrieval import PREVIOUS_RRF_THRESHOLD, data_arguments, read_conversations
from bench.output import print_result
from bench.small_store import TOP_K, asked_questions
from pipeline.clock import Clock
from pipeline.embeddings import open_embedder
from pipeline.retrieval import Thresholds, rank_query, search_facts
from pipeline.search.local import LocalFactSearch
from pipeline.search.query import FactQuery, SearchClients
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_DATA = REPO_ROOT / "ops" / "demo_data" / "launch_planning.jsonl"
DEMO_AGENT = "agent-juniper"


@dataclass(frozen=True)
class DemoQuestion:
    session: str
    user: str
    query: str
    #: a regular expression matching the content of the facts that answer it (None: nothing does)
    answer: str | None


#: Labelled by reading the demo conversation: each pattern names what was said in answer.
DEMO_QUESTIONS: tuple[DemoQuestion, ...] = (
    DemoQuestion("s3-maya-followup", "user-maya", "Maya's email", r"maya\.chen@lumenlabs"),
    DemoQuestion("s3-maya-followup", "user-maya", "Where does Maya live now?", r"\bPorto\b"),
    DemoQuestion("s3-maya-followup", "user-maya", "What is Maya's job?", r"product manager"),
    DemoQuestion("s3-maya-followup", "user-maya", "How will Maya get to Lisbon for the launch?", r"\btrain\b"),
    DemoQuestion("s3-maya-followup", "user-maya", "What is the total budget for the event?", r"total budget|12,000"),
    DemoQuestion("s3-maya-followup", "user-maya", "How much of the budget goes to catering?", r"^Catering should get"),
    DemoQuestion("s3-maya-followup", "user-maya", "Which venue was chosen for the launch?", r"launch venue is Fabrica"),
    DemoQuestion("s3-maya-followup", "user-maya", "When is the launch now?", r"March 21"),
    DemoQuestion("s3-maya-followup", "user-maya", "When does the caterer need the guest count?", r"guest count by March 10"),
    DemoQuestion("s3-maya-followup", "user-maya", "What is Maya's phone number?", None),
    DemoQuestion("s4-tom-av", "user-tom", "What does Tom do?", r"AV engineer"),
    DemoQuestion("s4-tom-av", "user-tom", "How large were the events Tom streamed?", r"500 people"),
    DemoQuestion("s4-tom-av", "user-tom", "How much money do AV and streaming get?", r"3,500"),
    DemoQuestion("s4-tom-av", "user-tom", "What is Tom allergic to?", None),
    DemoQuestion("s2-launch-team", "user-priya", "Who is joining the launch planning?", r"Tom and Priya"),
    DemoQuestion("s2-launch-team", "user-priya", "Does the venue have a kitchen?", r"\bkitchen\b"),
)


class Tally:
    """Hits per query and evidence per hit, for one set of questions under one setting."""

    def __init__(self) -> None:
        self.hits: list[int] = []
        self.evidence: list[int] = []

    def add(self, returned: Sequence[str], evidence: set[str] | frozenset[str]) -> None:
        self.hits.append(len(returned))
        self.evidence.append(sum(1 for fact_id in returned if fact_id in evidence))

    def summary(self, answerable: Sequence[bool] | None = None) -> dict:
        n, hits = len(self.hits), sum(self.hits)
        found = [e > 0 for e in self.evidence]
        out = {
            "questions": n,
            "hits_per_query": round(hits / n, 2) if n else None,
            "max_hits": max(self.hits, default=0),
            "evidence_share": round(sum(self.evidence) / hits, 4) if hits else None,
            "hit_rate": round(sum(found) / n, 4) if n else None,
        }
        if answerable is not None:  # the questions memory cannot answer: what noise they get
            idle = [h for h, a in zip(self.hits, answerable) if not a]
            out["unanswerable"] = {"questions": len(idle), "hits_per_query": round(sum(idle) / len(idle), 2) if idle else None}
            asked = [h for h, a in zip(found, answerable) if a]
            out["hit_rate"] = round(sum(asked) / len(asked), 4) if asked else None
        return out


def variants(settings: Settings, model: str) -> dict[str, Thresholds]:
    shipped = Thresholds.from_settings(settings, model)
    return {"previous": dataclasses.replace(shipped, rrf=PREVIOUS_RRF_THRESHOLD, rrf_rank=None), "shipped": shipped}


def small_store_precision(conversations: list[dict], settings: Settings) -> dict:
    embedder = open_embedder(settings)
    limits = variants(settings, embedder.model)
    tallies = {(name, size): Tally() for name in limits for size in ("5", "20", "100", "all")}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "small.db"))
        store.create_indexes()
        search = LocalFactSearch(store)
        for asked in asked_questions(conversations, embedder, store):
            for name, cut in limits.items():
                fused, _ = rank_query(search, asked.agent, ["agent"], embedder.model, asked.text, asked.vector, TOP_K, cut)
                returned = [f.fact_id for f in fused]
                tallies[(name, str(asked.size))].add(returned, asked.targets)
                tallies[(name, "all")].add(returned, asked.targets)
        store.close()
    return {name: {size: tallies[(name, size)].summary() for size in ("all", "5", "20", "100")} for name in limits}


def form_demo_store(folder: Path) -> Path:
    """The demo conversation formed by ``python -m ops.demo`` into ``folder``, offline."""
    db = folder / "demo.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_LLM_PROVIDER="offline", MEMORY_EMBEDDING_PROVIDER="local", PYTHONPATH=str(REPO_ROOT))
    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, "-m", "ops.demo", "--db", str(db), "--data", str(DEMO_DATA)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ops.demo exited {done.returncode}: {done.stderr[-2000:]}")
    return db


def demo_precision(settings: Settings) -> dict:
    embedder = open_embedder(settings)
    limits = variants(settings, embedder.model)
    tallies = {name: Tally() for name in limits}
    per_question: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(form_demo_store(Path(tmp))))
        search = LocalFactSearch(store)
        facts = {f.fact_id: f.content for f in store.facts.list_facts(DEMO_AGENT)}
        for q in DEMO_QUESTIONS:
            evidence = {fid for fid, text in facts.items() if q.answer and re.search(q.answer, text)}
            if q.answer and not evidence:
                raise RuntimeError(f"demo question {q.query!r}: no stored fact matches {q.answer!r}; relabel it")
            row: dict = {"query": q.query, "session": q.session, "user": q.user, "evidence": len(evidence)}
            for name, cut in limits.items():
                results = search_facts(
                    SearchClients(store, search, embedder, settings, Clock()),
                    FactQuery(DEMO_AGENT, q.session, q.user, q.query, top_k=TOP_K, thresholds=cut, track_access=False),
                )
                returned = [hit.id for hit in results.hits]
                tallies[name].add(returned, evidence)
                row[name] = {"hits": len(returned), "evidence_hits": len(evidence & set(returned))}
            per_question.append(row)
        store.close()
    answerable = [q.answer is not None for q in DEMO_QUESTIONS]
    return {**{name: tally.summary(answerable) for name, tally in tallies.items()}, "questions": per_question,
            "facts_stored": len(facts)}


def main(argv: list[str] | None = None) -> int:
    args = data_arguments(__doc__).parse_args(argv)
    conversations = read_conversations("search_precision", args.data)
    if conversations is None:
        return 2
    settings = Settings(embedding_provider="local")
    started = time.perf_counter()
    load_before = os.getloadavg()
    result = {"small_store": small_store_precision(conversations, settings), "demo": demo_precision(settings)}
    model = open_embedder(settings).model
    result["setup"] = {
        "embedding_model": model, "top_k": TOP_K,
        "thresholds": {name: cut.describe() for name, cut in variants(settings, model).items()},
        "seconds": round(time.perf_counter() - started, 1), "load_average_start": load_before,
        "load_average": os.getloadavg(),
    }
    rows = ((part, name, result[part][name]["all"] if part == "small_store" else result[part][name])
            for part in ("small_store", "demo") for name in ("previous", "shipped"))
    return print_result(result, (f"{part:12s} {name:9s} hits/query {row['hits_per_query']}  evidence share "
                                 f"{row['evidence_share']}  hit rate {row['hit_rate']}  ({row['questions']} q)"
                                 for part, name, row in rows), json_only=args.json)


if __name__ == "__main__":
    sys.exit(main())
