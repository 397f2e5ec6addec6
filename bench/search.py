"""Latency of ``search_facts`` and of the memory context at 100k facts per agent.

    python -m bench.search --facts 100000 --json [--store sqlite|mongo|both]
    python -m bench.search --cache-sweep [--agents 50 --agent-facts 20000]
    python -m bench.search --embedders --data ../shared/data/locomo/dev.json [--facts 100000]

``--embedders``: the offline embedders side by side (``bench.embedder_timing``): a query's
embedding p50/p95 per thread count, a formation batch's texts/s, the RSS each model adds, and
the SQLite search p95 at ``--facts`` without and with the query's embedding (each search time
plus a measured embedding time), the load average beside them.

The target agent holds ``--facts`` facts visible to (agent, user U0): agent-scoped ones plus
U0's own; they sit among at least 3x as many others (the same agent's other users, and two
other agents with as many facts each), so the pre-filter has real work to do.

- Texts are synthetic sentences over a 5,000-word vocabulary. Vectors are random unit vectors
  (384 dimensions; no model runs), and each query's vector is a noisy copy of one fact's
  vector (cosine ~0.9) or, for a quarter of them, unrelated. The embedder is a lookup table,
  and its time is excluded anyway.
- Queries are distinct, three content words of one visible fact; a third carry a typo.
- Production thresholds are on. Result caches are off (every query is new and the context
  figures force a rebuild); the search index cache (segments per scope) is on, built once
  before timing (its build time is reported).
- search p50/p95: the whole ``MemoryService.search_facts`` (visibility, both branches, RRF,
  fetching the facts, access tracking) minus embedding time.
- context p50/p95: ``get_memory_context`` served from the cache, and rebuilt
  (``force_refresh``), over several sessions.

On the Mongo path the store is the in-memory emulation of ``testkit`` (mongomock):
its figures show the local search over the Mongo adapter, not a real server's latency. The
emulation scans every document in Python for every query, so it runs at ``--mongo-facts``
(default 20k, among 3x as many), times the search stage only (no fetch or access writes),
and other agents' facts carry no vectors there (it keeps documents as Python lists).

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.search_corpus import (
    DIM, NOW, TARGET, USER, LookupEmbedder, add_memory, corpus_layout, fact_batches, load_mongo, load_sqlite,
    make_queries, unit_vectors, vocabulary,
)
from pipeline.clock import FrozenClock
from pipeline.service import MemoryService
from schemas.settings import Settings
from testkit.procstat import rss_mb


def _search_stage(service: MemoryService, query: str) -> dict:
    """The search stage of ``search_facts`` on the service's store, without fetch and access."""
    from pipeline.retrieval import Thresholds, rank_query

    limits = Thresholds.from_settings(service.settings, service.embedder.model)
    vector = service.embedder.embed([query]).vectors[0]
    t = time.perf_counter()
    fused, info = rank_query(service.search, TARGET, ["agent", f"user:{USER}"], service.embedder.model,
                             query, vector, 10, limits)
    return {"results": fused, "debug": {"timings_ms": {"search": (time.perf_counter() - t) * 1000}, "queries": [info]}}


def _rss_mb(kind: str = "VmRSS") -> float:
    """Resident memory of this process in MB (``procstat.rss_mb``; ``RssAnon``: the heap alone)."""
    return rss_mb(os.getpid(), kind) or 0.0


def _against_exact(service: MemoryService, queries: list[str], table: dict[str, np.ndarray]) -> dict:
    """The shipped semantic branch (int8 scan and float32 rescore for big segments) beside an
    exact float32 scan of the same facts, query by query in one run: the mean share of the
    top 10 they have in common, and each one's latency."""
    from pipeline.search.local import LocalFactSearch

    exact = LocalFactSearch(service.store, quantize_min=2**62)
    keys, model = ["agent", f"user:{USER}"], service.embedder.model
    exact.semantic(TARGET, keys, model, table[queries[0]].tolist(), 10, None)  # build its segments
    shares, shipped_ms, exact_ms = [], [], []
    for q in queries:
        vector = table[q].tolist()
        t = time.perf_counter()
        got = {h.fact_id for h in service.search.semantic(TARGET, keys, model, vector, 10, None)}
        shipped_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        want = {h.fact_id for h in exact.semantic(TARGET, keys, model, vector, 10, None)}
        exact_ms.append((time.perf_counter() - t) * 1000)
        shares.append(len(got & want) / max(1, len(want)))
    exact.clear()
    return {
        "top10_overlap": round(float(np.mean(shares)), 4),
        "shipped_ms": _pct(shipped_ms), "exact_float32_ms": _pct(exact_ms),
        "p50_ratio_shipped_to_exact": round(float(np.median(shipped_ms) / np.median(exact_ms)), 3),
    }


def _pct(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values)
    return {"p50": round(float(np.percentile(arr, 50)), 3), "p95": round(float(np.percentile(arr, 95)), 3)}


def bench(kind: str, n_facts: int, n_queries: int, seed: int) -> dict:
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    words = vocabulary(rng)
    layout = corpus_layout(n_facts)
    tmp = tempfile.TemporaryDirectory()
    t0 = time.perf_counter()
    store = _loaded_store(kind, Path(tmp.name), layout, words, rng, nrng)
    add_memory(store)
    load_s = time.perf_counter() - t0
    queries, table = make_queries(store, words, rng, nrng, n_queries)
    clock = FrozenClock(NOW)
    service = MemoryService(TARGET, settings=Settings(_env_file=None), store=store,
                            embedder=LookupEmbedder(table), clock=clock)
    rss_before = _rss_mb()
    t0 = time.perf_counter()
    service.search_facts("warm up the index", session_id="s0", user_id=USER)  # builds the cached segments
    build_s = time.perf_counter() - t0
    rss_after = _rss_mb()
    held_mb = service.search.held_bytes() / 2**20 if hasattr(service.search, "held_bytes") else None

    # On the emulation, fetching hits and recording access scan every document in Python
    # (seconds at 300k): time the search stage there (stamps, both branches, RRF) and keep the
    # full call for SQLite, whose figures are end to end.
    search_ms, hits, semantic_hits, stages = _timed_searches(service, queries, kind)

    semantic_vs_exact = _against_exact(service, queries, table) if kind == "sqlite" else None
    uncached, cached = _context_ms(service, kind)
    xml = service.get_memory_context(session_id="s0", user_id=USER)
    store.close()
    tmp.cleanup()
    return {
        "timed": "search_facts end to end minus embedding" if kind == "sqlite"
        else "search stage only (scope stamps, semantic, text, RRF), no fetch/access on the emulation",
        "facts_total": sum(c for _, _, c in layout),
        "facts_visible": sum(c for a, k, c in layout if a == TARGET and k in ("agent", f"user:{USER}")),
        "queries": len(queries), "typo_queries": (len(queries) + 2) // 3,
        "load_s": round(load_s, 1), "index_build_s": round(build_s, 2),
        "segments_held_mb": None if held_mb is None else round(held_mb, 1),
        "rss_growth_mb_per_100k": round((rss_after - rss_before) * 100_000 / n_facts, 1),
        "semantic_branch_vs_exact_float32": semantic_vs_exact,
        "search_ms": _pct(search_ms), "search_ms_samples": search_ms,
        "context_cached_ms": _pct(cached), "context_uncached_ms": _pct(uncached),
        "search_stage_p50_ms": {k: round(float(np.median(v)), 3) for k, v in stages.items()},
        "mean_results": round(float(np.mean(hits)), 2), "queries_with_semantic_hits": semantic_hits,
        "context_facts_shown": xml.count("\n  - ["),
    }



def _loaded_store(kind: str, folder: Path, layout, words, rng: random.Random, nrng):
    """A SQLite store, or a Mongo store on the emulation, holding the corpus."""
    if kind == "sqlite":
        from pipeline.store.sqlite import SQLiteStore

        store = SQLiteStore(str(folder / "bench.db"))
        store.create_indexes()
        load_sqlite(store, fact_batches(layout, words, rng, nrng, vectors_for_others=True))
    else:
        from pipeline.store.mongo import MongoStore

        from testkit.mongo_emulation import emulated_database

        store = MongoStore(emulated_database())
        # the emulation checks unique indexes by scanning: load first, index afterwards
        load_mongo(store, fact_batches(layout, words, rng, nrng, vectors_for_others=False))
        store.create_indexes()
    return store


def _timed_searches(service: MemoryService, queries: list[str], kind: str) -> tuple[list, list, int, dict]:
    """Each query's search time, hit count, whether its semantic branch found anything, and
    every stage's timings."""
    stage = "total" if kind == "sqlite" else "search"
    search_ms, hits, semantic_hits, stages = [], [], 0, {}
    for q in queries:
        if kind == "sqlite":
            answer = service.search_facts(q, session_id="s0", user_id=USER, debug=True)
        else:
            answer = _search_stage(service, q)
        timings = answer["debug"]["timings_ms"]
        for name, value in [*timings.items(), *answer["debug"]["queries"][0].get("timings_ms", {}).items()]:
            stages.setdefault(name, []).append(value)
        search_ms.append(timings[stage] - (timings.get("embed", 0.0) if stage == "total" else 0.0))
        hits.append(len(answer["results"]))
        semantic_hits += bool(answer["debug"]["queries"][0]["semantic"])
    return search_ms, hits, semantic_hits, stages


def _context_ms(service: MemoryService, kind: str) -> tuple[list[float], list[float]]:
    """Milliseconds of context reads over several sessions: forced fresh, and cached (three each)."""
    uncached, cached = [], []
    sessions = [f"s{i}" for i in range(20)]
    for round_ in range(5 if kind == "sqlite" else 1):
        for s in sessions if kind == "sqlite" else sessions[:5]:
            t = time.perf_counter()
            service.get_memory_context(session_id=s, user_id=USER, force_refresh=True)
            uncached.append((time.perf_counter() - t) * 1000)
            for _ in range(3):
                t = time.perf_counter()
                service.get_memory_context(session_id=s, user_id=USER)
                cached.append((time.perf_counter() - t) * 1000)
    return uncached, cached


def cache_sweep(n_agents: int, per_agent: int, seed: int) -> dict:
    """The segment cache under more agents than it can hold: ``n_agents`` agents of
    ``per_agent`` facts each are searched in turn, twice round, by one search instance with the
    shipped ``MEMORY_SEARCH_CACHE_MB``. Reports the bytes the cache holds and the process RSS
    after every search, so the bound is seen holding (or not) while segments are evicted."""
    from pipeline.search import open_search
    from pipeline.store.sqlite import SQLiteStore

    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    words = vocabulary(rng)
    layout = [(f"agent-{i}", "agent", per_agent) for i in range(n_agents)]
    tmp = tempfile.TemporaryDirectory()
    settings = Settings(_env_file=None)
    store = SQLiteStore(str(Path(tmp.name) / "bench.db"))
    store.create_indexes()
    t0 = time.perf_counter()
    load_sqlite(store, fact_batches(layout, words, rng, nrng, vectors_for_others=True))
    load_s = time.perf_counter() - t0
    search = open_search(store, settings)
    table = {"": unit_vectors(nrng, 1)[0]}
    queries = [" ".join(rng.sample(words, 3)) for _ in range(2 * n_agents)]
    table.update({q: unit_vectors(nrng, 1)[0] for q in queries})
    embedder = LookupEmbedder(table)
    rss_start, heap_start = _rss_mb(), _rss_mb("RssAnon")
    held, rss, heap, search_ms = [], [], [], []
    for i, query in enumerate(queries):
        agent = f"agent-{i % n_agents}"
        service = MemoryService(agent, settings=settings, store=store, search=search, embedder=embedder,
                                clock=FrozenClock(NOW))
        t = time.perf_counter()
        service.search_facts(query, session_id="s0", user_id=USER)
        search_ms.append((time.perf_counter() - t) * 1000)
        held.append(search.held_bytes() / 2**20)
        rss.append(_rss_mb())
        heap.append(_rss_mb("RssAnon"))
    store.close()
    tmp.cleanup()
    return {
        "agents": n_agents, "facts_per_agent": per_agent, "searches": len(queries),
        "cache_mb_setting": settings.search_cache_mb, "load_s": round(load_s, 1),
        "segment_mb": round(held[0], 1), "held_mb_max": round(max(held), 1),
        "held_mb_end": round(held[-1], 1),
        "rss_mb_start": round(rss_start, 1), "rss_mb_max": round(max(rss), 1), "rss_mb_end": round(rss[-1], 1),
        "rss_growth_mb_max": round(max(rss) - rss_start, 1),
        "heap_mb_start": round(heap_start, 1), "heap_mb_max": round(max(heap), 1), "heap_mb_end": round(heap[-1], 1),
        "heap_growth_mb_max": round(max(heap) - heap_start, 1),
        "heap_mb_after_first_round": round(heap[n_agents - 1], 1),
        "search_ms": _pct(search_ms),
    }


def _search_settings(settings: Settings) -> dict:
    """The search settings the run used (the shipped defaults unless the environment sets them)."""
    return {"cache_mb": settings.search_cache_mb, "blas_threads": settings.search_blas_threads,
            "scan_threads": settings.search_scan_threads, "segment_dir": settings.search_segment_dir}


def _embedders(args: argparse.Namespace) -> int:
    from bench import embedder_timing
    from bench.locomo_retrieval import read_conversations

    if not args.data:
        print("search bench: --embedders needs --data, a LoCoMo JSON file", file=sys.stderr)
        return 2
    conversations = read_conversations("search bench", args.data)
    if conversations is None:
        return 2
    questions, batch = embedder_timing.texts_of(conversations, args.queries)
    models = embedder_timing.timings(questions, batch)
    searched = bench("sqlite", args.facts, args.queries, args.seed)
    samples = searched.pop("search_ms_samples")
    for entry in models.values():
        entry["search_ms_with_query_embedding"] = embedder_timing.with_embedding(samples, entry.pop("query_samples_ms"))
    out = {"facts": args.facts, "queries": len(questions), "formation_batch": len(batch),
           "search_ms_without_embedding": searched["search_ms"], "models": models,
           "settings": {"e5_query_threads": "1 and 2 measured (shipped: MEMORY_E5_QUERY_THREADS)",
                        "minilm_threads": "onnxruntime intra-op 2 (fixed)", **_search_settings(Settings(_env_file=None))},
           "load_average": [round(x, 2) for x in os.getloadavg()]}
    if not args.json:
        for name, entry in models.items():
            print(name, json.dumps(entry))
    print(json.dumps(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="facts visible to the target agent and user")
    parser.add_argument("--queries", type=int, default=300, help="distinct queries")
    parser.add_argument("--store", choices=["sqlite", "mongo", "both"], default="both")
    parser.add_argument("--mongo-facts", type=int, default=20_000,
                        help="facts for the Mongo emulation, which scans every document in Python "
                             "(~3k inserts/s, seconds per query at 300k): 20k keeps the run short")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-sweep", action="store_true",
                        help="instead: search --agents agents of --agent-facts facts each in turn, twice, "
                             "and report the segment cache's bytes and the RSS against MEMORY_SEARCH_CACHE_MB")
    parser.add_argument("--agents", type=int, default=50, help="agents for --cache-sweep")
    parser.add_argument("--agent-facts", type=int, default=20_000, help="facts per agent for --cache-sweep")
    parser.add_argument("--embedders", action="store_true",
                        help="instead: the offline embedders side by side (needs --data), and the SQLite "
                             "search p95 at --facts without and with the query's embedding")
    parser.add_argument("--data", type=Path, help="LoCoMo JSON whose questions --embedders embeds")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.facts < 100 or args.queries < 10:
        print("search bench: --facts must be >= 100 and --queries >= 10", file=sys.stderr)
        return 2
    if args.embedders:
        return _embedders(args)
    if args.cache_sweep:
        if args.agents < 1 or args.agent_facts < 100:
            print("search bench: --agents must be >= 1 and --agent-facts >= 100", file=sys.stderr)
            return 2
        out = {"cache_sweep": cache_sweep(args.agents, args.agent_facts, args.seed),
               "load_average": [round(x, 2) for x in os.getloadavg()]}
        print(json.dumps(out))
        return 0
    out: dict = {
        "facts": args.facts, "vectors": f"random unit, {DIM} dims", "thresholds": "production",
        "search_settings": _search_settings(Settings(_env_file=None)),
    }
    for kind in (["sqlite", "mongo"] if args.store == "both" else [args.store]):
        n = args.facts if kind == "sqlite" else min(args.mongo_facts, args.facts)
        out[kind] = bench(kind, n, args.queries, args.seed)
        out[kind].pop("search_ms_samples")
        if not args.json:
            print(kind, json.dumps(out[kind]))
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
