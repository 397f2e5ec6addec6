"""An ANN index (usearch HNSW) against the shipped int8 scan with exact float32 rescore.

    python -m bench.ann [--facts 1000000] [--queries 200] [--json]

Both sides index the same ``--facts`` random unit vectors (384 dimensions, as
``bench.search``); each query is a noisy copy of one fact's vector (cosine ~0.9) or, for a
quarter of them, unrelated. For each side, in one run:

- ``build_s``: the shipped side is ``Segment``'s vector part (int8 codes, per-row scales, the
  float32 rows on file); the text index is left out, as it is the same for both. usearch adds
  every vector with all the machine's threads.
- ``rss_mb``: growth of this process's resident memory over the build.
- ``query_ms`` p50/p95: one query at a time, one thread, top 10.
- ``recall_at_10``: overlap of the top 10 with the exact float32 scan of every vector;
  ``recall_at_1``: how often the first result is the exact best. On random vectors only a
  query's near copy stands out, the other nine of its exact top 10 sit at cosine ~0.15 among
  thousands of equals: the hardest case for a graph index, and the usual one for the
  rescore's candidates.

usearch is not a dependency of the project (``pip install usearch`` to run this); nothing
shipped uses it. importing usearch before simsimd makes simsimd's int8 ``cdist`` refuse its
inputs, so the two could not share a process as they are (this bench imports simsimd first). The last line printed is one JSON object, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from pipeline.search.segment import RESCORE_FACTOR, RESCORE_MIN, Segment, VectorFile, quantize
from pipeline.search.text_index import TextIndex
from testkit.procstat import rss_mb

DIM = 384
TOP = 10


def _rss_mb() -> float:
    return rss_mb(os.getpid()) or 0.0


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):  # in slices: no float64 copy of the whole matrix
        block = rng.standard_normal((min(100_000, n - start), DIM), dtype=np.float32)
        out[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def _queries(rng: np.random.Generator, matrix: np.ndarray, n: int) -> np.ndarray:
    near = matrix[rng.integers(0, len(matrix), n)] + rng.standard_normal((n, DIM), dtype=np.float32) * 0.025
    far = _unit(rng, n)
    queries = np.where((np.arange(n) % 4 == 3)[:, None], far, near)
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)


def _exact_top(matrix: np.ndarray, queries: np.ndarray) -> list[tuple[set[int], int]]:
    """Each query's exact top 10 (as a set) and its best row."""
    tops = []
    for start in range(0, len(queries), 50):
        scores = queries[start:start + 50] @ matrix.T
        tops += [(set(np.argpartition(-row, TOP)[:TOP].tolist()), int(np.argmax(row))) for row in scores]
    return tops


def _scores(times: list[float], hits: int, firsts: int, n: int) -> dict:
    return {"query_ms": _pct(times), "recall_at_10": round(hits / (TOP * n), 4), "recall_at_1": round(firsts / n, 4)}


def _pct(values: list[float]) -> dict[str, float]:
    ms = np.asarray(values) * 1000
    return {"p50": round(float(np.percentile(ms, 50)), 3), "p95": round(float(np.percentile(ms, 95)), 3)}


def shipped(matrix: np.ndarray, queries: np.ndarray, truth: list[set[int]]) -> dict:
    rss, started = _rss_mb(), time.perf_counter()
    codes, scales = quantize(matrix)
    segment = Segment([], np.zeros(len(matrix)), np.ones(len(matrix), dtype=bool), TextIndex.from_contents([]),
                      dim=DIM, codes=codes, scales=scales, vectors=VectorFile(matrix))
    build = time.perf_counter() - started
    grown = _rss_mb() - rss
    times, hits, firsts = [], 0, 0
    for query, (want, best) in zip(queries, truth):
        started = time.perf_counter()
        rows, scores = segment.cosines(query, TOP)
        top = rows[np.argsort(-scores, kind="stable")[:TOP]]
        times.append(time.perf_counter() - started)
        hits += len(want & set(top.tolist()))
        firsts += int(top[0]) == best
    segment.close()
    return {"build_s": round(build, 2), "rss_mb": round(grown, 1), **_scores(times, hits, firsts, len(queries)),
            "rescored_rows": max(RESCORE_FACTOR * TOP, RESCORE_MIN)}


def ann(matrix: np.ndarray, queries: np.ndarray, truth: list[set[int]], dtype: str, efs: list[int]) -> dict:
    from usearch.index import Index

    rss, started = _rss_mb(), time.perf_counter()
    index = Index(ndim=DIM, metric="cos", dtype=dtype)
    index.add(np.arange(len(matrix), dtype=np.uint64), matrix, threads=os.cpu_count() or 1)
    build = time.perf_counter() - started
    out = {"dtype": dtype, "connectivity": index.connectivity, "build_threads": os.cpu_count(),
           "build_s": round(build, 2), "rss_mb": round(_rss_mb() - rss, 1), "by_expansion_search": {}}
    for ef in efs:
        index.expansion_search = ef
        times, hits, firsts = [], 0, 0
        for query, (want, best) in zip(queries, truth):
            started = time.perf_counter()
            found = index.search(query, TOP, threads=1)
            times.append(time.perf_counter() - started)
            keys = np.asarray(found.keys).tolist()
            hits += len(want & set(keys))
            firsts += bool(keys) and int(keys[0]) == best
        out["by_expansion_search"][str(ef)] = _scores(times, hits, firsts, len(queries))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1_000_000, help="vectors indexed (default 1M)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dtype", default="i8", help="usearch storage type: i8 (as the shipped scan), f16, f32")
    parser.add_argument("--expansion-search", default="64,256", help="usearch ef values measured, comma-separated")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.facts < 100 or args.queries < 1:
        parser.error(f"--facts must be >= 100 and --queries >= 1, got {args.facts} and {args.queries}")
    # simsimd first: imported after usearch (2.26.6, numkong 7.8.6), simsimd's cdist refuses
    # int8 inputs ("Input tensors must have matching datatypes")
    import simsimd  # noqa: F401

    try:
        import usearch  # noqa: F401
    except ImportError:
        print("this benchmark needs usearch, which the project does not depend on: pip install usearch",
              file=sys.stderr)
        return 2
    say = (lambda *a: None) if args.json else (lambda *a: print(*a, file=sys.stderr))
    rng = np.random.default_rng(args.seed)
    matrix = _unit(rng, args.facts)
    queries = _queries(rng, matrix, args.queries)
    truth = _exact_top(matrix, queries)
    say(f"{args.facts} vectors, {args.queries} queries; exact top-10 computed")
    result = {"facts": args.facts, "dim": DIM, "queries": args.queries}
    result["int8_scan_rescore"] = shipped(matrix, queries, truth)
    say("int8 scan + rescore:", result["int8_scan_rescore"])
    result["usearch_hnsw"] = ann(matrix, queries, truth, args.dtype, [int(x) for x in args.expansion_search.split(",")])
    say("usearch:", result["usearch_hnsw"])
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
