"""Memory of search segments across worker processes: mapped files against private copies.

    python -m bench.search_shared --facts 100000 --json [--processes 1,2,4] [--rounds 3]

One segment of ``--facts`` facts (random unit vectors of 384 dimensions, so the int8 scan and
float32 rescore apply; synthetic sentences over a 5,000-word vocabulary for the text index)
is built once and written as ``pipeline.search.segment_files`` writes it. Then, for each
process count, that many fresh processes each either map it (``mapped``: what
``MEMORY_SEARCH_SEGMENT_DIR`` gives) or hold their own copy in memory (``private``: what each
process built before), run ``--queries`` searches on both branches, wait for the others, and
read their own ``/proc/self/smaps_rollup``. Reported per process, as the growth over the
process before it loaded the segment: USS (its private pages, Private_Clean + Private_Dirty;
a file page only this process has touched counts here although the page cache could share
it), PSS (its proportional share: a page shared by N processes counts 1/N) and anonymous
memory (its heap, which no other process can share), in MB, the mean over the processes;
and beside them the median time of one semantic scan with its rescore (``scan_ms``) and of
one query term's typo-tolerant lookup with its postings (``term_ms``), timings that follow
the machine's load. With ``--rounds N`` both modes are measured N times, alternating which
goes first, and the medians are reported (each round's figures beside them). The last line
printed is one JSON object, with the load average.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from bench.output import print_result
from bench.search_scan import int_list

DIM = 384
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
VOCABULARY = [f"w{chr(97 + i % 26)}{i}" for i in range(5000)]


def _memory_kb() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/smaps_rollup", encoding="ascii") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                out[parts[0][:-1]] = int(parts[1])
    return {"uss": out.get("Private_Clean", 0) + out.get("Private_Dirty", 0), "pss": out.get("Pss", 0),
            "anon": out.get("Anonymous", 0)}


def _private_copy(segment):
    """The mapped segment's arrays copied into this process's memory (what a build holds)."""
    from pipeline.search.segment import VectorFile
    from pipeline.search.segment_files import IdTable
    from pipeline.search.text_index import TextIndex

    ids = IdTable(np.array(segment.ids._blob), np.array(segment.ids._offsets))
    segment.ids = [ids[i] for i in range(len(ids))]
    segment.formed_at, segment.has_vector = np.array(segment.formed_at), np.array(segment.has_vector)
    text = segment.text
    segment.text = TextIndex.from_arrays({t: text.terms[t] for t in text.terms}, np.array(text.offsets), np.array(text.rows),
                                         np.array(text.tfs), np.array(text.doc_len), alphabet=text.alphabet)
    if segment.codes is not None:
        segment.codes, segment.scales = np.array(segment.codes), np.array(segment.scales)
        # as a build keeps them: in this process's own temporary file, read with pread
        size, dim = len(segment.ids), segment.dim
        everything = segment.vectors.rows(np.arange(size))
        segment.vectors.close()
        segment.vectors = VectorFile(everything.reshape(size, dim))
        del everything
    else:
        segment.matrix = np.array(segment.matrix)
    return segment


def _worker(folder: str, mode: str, queries: int, barrier, results) -> None:
    from pipeline.search import scoring
    from pipeline.search.segment import Segment
    from pipeline.search.segment_files import load
    from pipeline.store.port import FactCandidate

    # every library loaded and used once first (simsimd, numpy's kernels), so the growth
    # measured is the segment's, not the code's
    warm = [FactCandidate(f"w{i}", "agent", None, "warm up", np.eye(1, DIM, i % DIM)[0], T0) for i in range(64)]
    warmed = Segment.build(warm, "warm", quantize_min=1)
    warmed.cosines(np.eye(1, DIM, 0)[0].astype(np.float32), 10)
    for match in warmed.text.matches(scoring.stem("warms")):
        warmed.text.postings(match)
    before = _memory_kb()
    segment = load(Path(folder))
    if mode == "private":
        segment = _private_copy(segment)
    rng = np.random.default_rng(os.getpid())
    scans, lookups = [], []
    for _ in range(queries):
        query = rng.standard_normal(DIM).astype(np.float32)
        started = time.perf_counter()
        segment.cosines(query / np.linalg.norm(query), 10)
        scans.append(time.perf_counter() - started)
        for i in rng.integers(0, len(VOCABULARY), 3):  # words of the texts, a third with a typo
            for term in scoring.tokenize(VOCABULARY[i] + ("x" if i % 3 == 0 else "")):
                started = time.perf_counter()
                for match in segment.text.matches(term):
                    segment.text.postings(match)
                lookups.append(time.perf_counter() - started)
    barrier.wait()  # every process holds the segment now: shared pages are shared
    after = _memory_kb()
    results.put({**{key: (after[key] - before[key]) / 1024 for key in after},
                 "scan_ms": float(np.median(scans)) * 1000, "term_ms": float(np.median(lookups)) * 1000})
    barrier.wait()


def _build(folder: Path, n: int, seed: int) -> float:
    from pipeline.search.segment import Segment
    from pipeline.search.segment_files import save
    from pipeline.store.port import FactCandidate

    rng = np.random.default_rng(seed)
    vocabulary = VOCABULARY
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    picks = rng.integers(0, len(vocabulary), (n, 8))
    started = time.perf_counter()
    candidates = [
        FactCandidate(f"{i:08x}-fact", "agent", None, " ".join(vocabulary[j] for j in picks[i]) + f" ref{i}", vectors[i], T0)
        for i in range(n)
    ]
    segment = Segment.build(candidates, "bench")
    save(segment, folder)
    segment.close()
    return time.perf_counter() - started


def measure(folder: Path, mode: str, processes: int, queries: int) -> dict:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_worker, args=(str(folder), mode, queries, barrier, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    rows = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    out = {key: round(sum(r[key] for r in rows) / len(rows), 1) for key in ("uss", "pss", "anon")}
    return out | {key: round(sum(r[key] for r in rows) / len(rows), 3) for key in ("scan_ms", "term_ms")}


def _median(rows: list[dict]) -> dict:
    return {key: round(float(np.median([r[key] for r in rows])), 3) for key in rows[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--processes", type=int_list, default=[1, 2, 4])
    parser.add_argument("--queries", type=int, default=20, help="searches per process before it is measured")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure both modes this many times, alternating which goes first; report medians")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.facts < 1:
        parser.error("--facts must be at least 1")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="segments-") as tmp:
        folder = Path(tmp) / "segment"
        folder.mkdir()
        built = _build(folder, args.facts, args.seed)
        on_disk = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
        rounds: list[dict] = []
        for n in range(args.rounds):
            # side by side: each process count in both modes in turn, the first mode alternating
            # by round, so that a change of the machine's load falls on both alike
            modes = ("private", "mapped") if n % 2 == 0 else ("mapped", "private")
            rounds.append({mode: {f"processes={p}": measure(folder, mode, p, args.queries) for p in args.processes}
                           for mode in modes})
        results = {mode: {f"processes={p}": _median([r[mode][f"processes={p}"] for r in rounds])
                          for p in args.processes} for mode in ("private", "mapped")}
    out = {**results, "rounds": rounds if args.rounds > 1 else None, "setup": {
        "facts": args.facts, "dim": DIM, "queries_per_process": args.queries, "rounds": args.rounds,
        "build_and_write_s": round(built, 1),
        "files_mb": round(on_disk, 1), "load_average_start": load_before, "load_average": os.getloadavg(),
    }}
    return print_result(out, (
        f"{mode:8s} {key:12s} USS +{row['uss']} MB  PSS +{row['pss']} MB  "
        f"anonymous +{row['anon']} MB per process; scan {row['scan_ms']} ms, term {row['term_ms']} ms"
        for mode, rows in results.items() for key, row in rows.items()), json_only=args.json)


if __name__ == "__main__":
    sys.exit(main())
