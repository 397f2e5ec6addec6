"""What a filter by category or metadata costs a search and a context, on SQLite.

    python -m bench.filters [--facts 20000] [--queries 60] --json

The corpus is ``bench.search``'s (``bench.search_corpus``: the target agent's ``--facts``
visible facts among 3x as many others, random unit vectors, synthetic texts, the lookup
embedder: no model time), each fact filed under one of the 15 default categories (1 in 15
matches a category filter), with a ``project`` of 500 (1 in 500) and a ``tier`` of 2 (1 in 2),
marked filterable. Every query is timed once per filter, the filters interleaved query by query
so that load moves all of them alike:

- ``none``: no filter; ``category``: one category; ``project``: one project (narrow);
  ``tier``: one tier (broad); ``category+tier``: both (two groups intersected).

Figures: ``search_facts`` end to end minus embedding (p50/p95, and the ratio of each filter's
p50 to the unfiltered one; the first query of each filter apart, since it computes the rows
the filter lets through, which the segment keeps until its scope changes), mean results, and the context rebuilt without and with a filter.
The shipped defaults (``Settings()``) are used, as production thresholds; the last line
printed is one JSON object, with the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.output import print_result
from bench.search_corpus import (NOW, TARGET, USER, LookupEmbedder, add_memory, corpus_layout, fact_batches,
                                 load_sqlite, make_queries, vocabulary)
from pipeline.clock import FrozenClock
from pipeline.owner.categories import DEFAULT_CATEGORIES
from pipeline.service import MemoryService
from pipeline.store.sqlite import SQLiteStore
from schemas.documents import AgentSettings
from schemas.settings import Settings

PROJECTS, TIERS = 500, 2
FILTERS: dict[str, dict] = {
    "none": {},
    "category": {"categories": ["travel"]},
    "project": {"metadata": {"project": "p7"}},
    "tier": {"metadata": {"tier": 1}},
    "category+tier": {"categories": ["travel"], "metadata": {"tier": 1}},
}


def _filed(batches, rng: random.Random):
    """The corpus's facts, each filed under a category with a project and a tier."""
    for batch in batches:
        yield [(fact.model_copy(update={
            "categories": [rng.choice(DEFAULT_CATEGORIES)],
            "metadata": {"project": f"p{rng.randrange(PROJECTS)}", "tier": rng.randrange(TIERS)},
        }), vector) for fact, vector in batch]


def _pct(values: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(values, 50)), 2), "p95": round(float(np.percentile(values, 95)), 2)}


def bench(n_facts: int, n_queries: int, seed: int) -> dict:
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    words = vocabulary(rng)
    layout = corpus_layout(n_facts)
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(str(Path(folder) / "bench.db"))
        store.create_indexes()
        t0 = time.perf_counter()
        load_sqlite(store, _filed(fact_batches(layout, words, rng, nrng, vectors_for_others=True), rng))
        load_s = time.perf_counter() - t0
        add_memory(store)
        store.ingest.put_agent_settings(AgentSettings(agent_id=TARGET, metadata_keys=["project", "tier"]))
        queries, table = make_queries(store, words, rng, nrng, n_queries)
        service = MemoryService(TARGET, settings=Settings(_env_file=None), store=store,
                                embedder=LookupEmbedder(table), clock=FrozenClock(NOW))
        service.search_facts("warm up the index", session_id="s0", user_id=USER)  # builds the segments
        search_ms: dict[str, list[float]] = {name: [] for name in FILTERS}
        results: dict[str, list[int]] = {name: [] for name in FILTERS}
        for query in queries:
            for name, where in FILTERS.items():
                answer = service.search_facts(query, session_id="s0", user_id=USER, debug=True, **where)
                timings = answer["debug"]["timings_ms"]
                search_ms[name].append(timings["total"] - timings.get("embed", 0.0))
                results[name].append(len(answer["results"]))
        context_ms: dict[str, list[float]] = {"none": [], "category": []}
        for _ in range(5):
            for name in context_ms:
                t = time.perf_counter()
                service.get_memory_context(session_id="s0", user_id=USER, force_refresh=True, **FILTERS[name])
                context_ms[name].append((time.perf_counter() - t) * 1000)
        store.close()
    base = float(np.percentile(search_ms["none"], 50))
    return {
        "defaults": "Settings() shipped defaults; lookup embedder (random 384-d vectors, no model time)",
        "facts_visible": sum(c for a, k, c in layout if a == TARGET and k in ("agent", f"user:{USER}")),
        "facts_total": sum(c for _, _, c in layout), "queries": len(queries), "load_s": round(load_s, 1),
        "search_ms": {name: _pct(v) for name, v in search_ms.items()},
        # the first query of each filter computes its rows once per segment (kept until a change)
        "first_search_ms": {name: round(v[0], 2) for name, v in search_ms.items()},
        "search_p50_ratio_to_unfiltered": {name: round(float(np.percentile(v, 50)) / base, 2)
                                           for name, v in search_ms.items()},
        "mean_results": {name: round(float(np.mean(v)), 2) for name, v in results.items()},
        "context_rebuilt_ms": {name: _pct(v) for name, v in context_ms.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.filters", description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=20_000, help="the target's visible facts (default 20000)")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the JSON line only")
    args = parser.parse_args(argv)
    result = bench(args.facts, args.queries, args.seed)
    lines = [f"{name:>14}: p50 {v['p50']} ms, p95 {v['p95']} ms, x{result['search_p50_ratio_to_unfiltered'][name]}, "
             f"{result['mean_results'][name]} results" for name, v in result["search_ms"].items()]
    return print_result(result, lines, json_only=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
