"""Import throughput: simple JSON Lines (CRM-style facts) into a fresh SQLite store through
``usecases.imports``, with the configured embedder, the facts embedded in batches of
``EMBED_BATCH`` and, for comparison, one at a time; then the batched file imported again (every
line's key stored, saying the same: nothing embedded, nothing written).

    python -m bench.imports --lines 1000 --json

Reported: lines per second each way and again, the seconds taken, and the load average (the machine is
shared: compare figures of one sitting only). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.output import print_result

WORDS = ("renews", "contract", "seats", "invoice", "office", "team", "plan", "support", "region", "budget")


def crm_lines(n: int, offset: int = 0) -> bytes:
    """``n`` distinct simple lines over 100 users (each a different text)."""
    rows = []
    for i in range(offset, offset + n):
        w = [WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)]
        rows.append({"user_id": f"user-{i % 100}", "text": f"Customer {i} {w[0]} the {w[1]} with {i % 50} {w[2]}",
                     "categories": ["professional_details"]})
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _timed(deps, body: bytes, batch: int) -> tuple[float, dict]:
    from usecases import imports

    kept, imports.EMBED_BATCH = imports.EMBED_BATCH, batch
    try:
        t = time.perf_counter()
        summary = imports.import_file(deps, [body], "bench-agent", by="bench")
        counts = {"added": summary.added, "rejected": summary.rejected}
        if summary.unchanged:
            counts["unchanged"] = summary.unchanged
        return time.perf_counter() - t, counts
    finally:
        imports.EMBED_BATCH = kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1000, help="lines imported each way")
    parser.add_argument("--json", action="store_true", help="print only the JSON figures")
    args = parser.parse_args(argv)

    from pipeline.clock import Clock
    from pipeline.embeddings import open_embedder
    from pipeline.store import open_store
    from schemas.settings import Settings
    from usecases.imports import EMBED_BATCH

    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(store_url=f"sqlite:///{Path(folder) / 'bench.db'}")

        class Deps:
            store = open_store(settings)
            embedder = open_embedder(settings)
            clock = Clock()

        Deps.settings = settings
        Deps.store.create_indexes()
        Deps.embedder.embed(["warm up"])  # the first call pages the weights in
        load_before = os.getloadavg()
        batched_s, batched = _timed(Deps, crm_lines(args.lines), EMBED_BATCH)
        single_s, single = _timed(Deps, crm_lines(args.lines, offset=args.lines), 1)
        again_s, again = _timed(Deps, crm_lines(args.lines), EMBED_BATCH)
        Deps.store.close()
    result = {
        "embedder": Deps.embedder.model, "lines": args.lines, "embed_batch": EMBED_BATCH,
        "batched_lines_per_s": round(args.lines / batched_s, 1), "batched_s": round(batched_s, 2),
        "one_at_a_time_lines_per_s": round(args.lines / single_s, 1), "one_at_a_time_s": round(single_s, 2),
        "again_lines_per_s": round(args.lines / again_s, 1), "again_s": round(again_s, 2),
        "batched": batched, "one_at_a_time": single, "again": again,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }

    def lines():
        yield f"import of {args.lines} simple lines with {result['embedder']} (load {result['load_average_after'][0]})"
        yield f"  batches of {EMBED_BATCH}: {result['batched_lines_per_s']} lines/s"
        yield f"  one at a time: {result['one_at_a_time_lines_per_s']} lines/s"
        yield f"  the batched file again (all unchanged): {result['again_lines_per_s']} lines/s"

    return print_result(result, lines(), json_only=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
