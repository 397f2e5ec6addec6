"""The semantic scan of one big segment under concurrency, with its int8 scan split over 1 or
more threads (``MEMORY_SEARCH_SCAN_THREADS``).

    python -m bench.search_scan --facts 100000 --json [--threads 1,2] [--concurrency 1,4,16]

A segment of ``--facts`` random unit vectors (384 dimensions) is built as the local search
builds a big one (int8 codes, float32 rows on file for the rescore), then the queries (noisy
copies of stored vectors, cosine ~0.9) run through ``Segment.cosines`` with top 10: for each
scan thread count and each concurrency, ``--queries`` queries spread over that many Python
threads at once, as concurrent ``search_facts`` calls of one worker process run. Reported per
setting: the latency of one query (p50 / p95, ms), the throughput (queries/s) and the share of
queries whose top 10 equals that of the 1-thread scan. Only the scan and rescore are timed
(the text branch, fusion and the store are not), so the figures isolate what the setting
moves. The last line printed is one JSON object, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import numpy as np

from bench.output import print_result
from pipeline.search.segment import Segment
from pipeline.store.port import FactCandidate

DIM = 384
TOP = 10
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def build(n: int, seed: int) -> tuple[Segment, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    candidates = [FactCandidate(f"f{i}", "agent", None, "", vectors[i], T0) for i in range(n)]
    return Segment.build(candidates, "bench"), vectors


def queries(vectors: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    picked = vectors[rng.integers(0, vectors.shape[0], n)]
    # entries of sd 0.025 over 384 dimensions: cosine 1 / sqrt(1 + 384 * 0.025^2) ~ 0.9
    noisy = picked + 0.025 * rng.standard_normal(picked.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def _top(segment: Segment, query: np.ndarray, threads: int) -> tuple[float, tuple[int, ...]]:
    start = time.perf_counter()
    rows, cosines = segment.cosines(query, TOP, threads)
    best = rows[np.argsort(-cosines, kind="stable")[:TOP]]
    return time.perf_counter() - start, tuple(sorted(best.tolist()))


def run(segment: Segment, qs: np.ndarray, threads: int, concurrency: int, reference: list[tuple[int, ...]]) -> dict:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(lambda q: _top(segment, q, threads), qs))
    wall = time.perf_counter() - start
    latencies = sorted(a[0] * 1000 for a in answers)
    same = sum(a[1] == r for a, r in zip(answers, reference)) / len(answers)
    return {
        "p50_ms": round(latencies[len(latencies) // 2], 2),
        "p95_ms": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 2),
        "queries_per_s": round(len(answers) / wall, 1), "same_top10": round(same, 4),
    }


def int_list(text: str) -> list[int]:
    """An argparse type: "1,4,16" -> [1, 4, 16], each at least 1 (a clear error otherwise)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers of 1 or more, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="vectors in the segment")
    parser.add_argument("--queries", type=int, default=200, help="queries per setting")
    parser.add_argument("--threads", type=int_list, default=[1, 2], help="scan thread counts, e.g. 1,2")
    parser.add_argument("--concurrency", type=int_list, default=[1, 4, 16], help="concurrent searches, e.g. 1,4,16")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.facts < 4096:
        parser.error("--facts must be at least 4096: smaller segments are scanned exactly, without int8")
    load_before = os.getloadavg()
    started = time.perf_counter()
    segment, vectors = build(args.facts, args.seed)
    built = time.perf_counter() - started
    qs = queries(vectors, args.queries, args.seed)
    reference = [_top(segment, q, 1)[1] for q in qs]
    results = {
        f"threads={t}": {f"concurrency={c}": run(segment, qs, t, c, reference) for c in args.concurrency}
        for t in args.threads
    }
    segment.close()
    out = {
        **results,
        "setup": {"facts": args.facts, "queries": args.queries, "dim": DIM, "top": TOP, "build_s": round(built, 2),
                  "cores": len(os.sched_getaffinity(0)), "load_average_start": load_before,
                  "load_average": os.getloadavg()},
    }
    rows = ((t, c, results[f"threads={t}"][f"concurrency={c}"]) for t in args.threads for c in args.concurrency)
    return print_result(out, (f"threads {t}  concurrency {c:2d}  p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms  "
                              f"{r['queries_per_s']} q/s  same top 10 {r['same_top10']}" for t, c, r in rows),
                        json_only=args.json)


if __name__ == "__main__":
    sys.exit(main())
