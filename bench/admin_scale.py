"""``python -m bench.admin_scale``: the per-user and per-agent operations at growing store
sizes (design §11 "Provenance and erasure"), on SQLite.

For each size in ``--facts`` (default ``10000,100000``) a store is built
(``testkit.admin_store``, written chunk by chunk in one transaction: that many facts over
``facts / 10`` users and 100 agents, two messages per fact, a run, a session and a cached
context per user), plus one probed user in an agent of their own, the same at every size (20
facts, a one-to-one session and a group chat, two runs in the cost window). Each operation
then runs in a fresh process, so that its peak RSS is its own:

    export-user, stats, cost --since 1d, an uncached context, forget-user, --verify

the four reads ``--repeat`` times each (default 3, the median kept), the two that change the
store once. The JSON printed holds, per size and operation, the seconds and the peak RSS in
MB, with the load average and the aims (≤ 2× growth from the smallest size, forget/export < 1 s, RSS < 200 MB).

``--mongo`` adds the MongoDB emulation at the first size. It is slow, so it is measured by the
documents its queries examine (planned from the declared indexes as MongoDB plans them,
``testkit/mongo_explain.py``), not by time: per operation the queries, the documents
examined and matched, and the worst ratio of examined to (matched + 10).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

OPERATIONS = ("export", "stats", "cost", "context", "forget", "verify")
#: the operations that change nothing the next one reads (an uncached context only rewrites its cache)
READS = ("export", "stats", "cost", "context")
PROBE_AGENT = "agent-probe"


def _settings(db: Path):
    from schemas.settings import Settings

    return Settings(store_url=f"sqlite:///{db}", embedding_provider="hashing")


def build(db: Path, facts: int) -> float:
    """Build the store of ``facts`` facts at ``db``; returns the seconds it took."""
    from testkit.admin_store import add_probe, bulk_chunks, write_bulk
    from pipeline.clock import FrozenClock
    from pipeline.store import open_store

    started = time.perf_counter()
    settings = _settings(db)
    store = open_store(settings)
    write_bulk(store, bulk_chunks(facts))
    store.create_indexes()
    add_probe(store, settings, FrozenClock(), agent_id=PROBE_AGENT)
    store.close()
    return time.perf_counter() - started


def run_operation(db: Path, operation: str) -> dict:
    """One operation on the probed user or agent, timed in this process."""
    from testkit.admin_store import PROBE
    from usecases.cost import cost_report
    from pipeline.clock import FrozenClock
    from pipeline.export import export_user
    from pipeline.forgetting import forget_user, verify_erasure
    from pipeline.llm.offline import OfflineLLM
    from pipeline.service import MemoryService
    from pipeline.store import open_store

    settings = _settings(db)
    store = open_store(settings)
    service = MemoryService(PROBE_AGENT, settings=settings, store=store, run_starter=lambda run_id: None)
    started = time.perf_counter()
    if operation == "export":
        detail = sum(1 for _ in export_user(store, PROBE))
    elif operation == "stats":
        detail = service.get_memory_stats(user_id=PROBE)
    elif operation == "cost":
        # the window of the probed runs: the build's clock (its day), not this machine's today,
        # which would find no run at all and time an empty window
        since = FrozenClock().now() - timedelta(days=1)
        detail = cost_report(store, PROBE_AGENT, since=since)["total"]["by_model"]["gpt-5-mini"]["input_tokens"]
    elif operation == "context":
        detail = len(service.get_memory_context(session_id="s-probe", user_id=PROBE, force_refresh=True))
    elif operation == "forget":
        detail = forget_user(store, PROBE, settings=settings, llm=OfflineLLM(settings)).counts["facts_by_source"]
    else:
        detail = verify_erasure(store, PROBE).passed(strict=False)
    seconds = time.perf_counter() - started
    store.close()
    return {"seconds": round(seconds, 4), "peak_rss_mb": peak_rss_mb(),
            "detail": detail if isinstance(detail, (int, float, bool, str)) else None}


def peak_rss_mb() -> float:
    """This process's peak RSS (``VmHWM``). Not ``getrusage``'s ``ru_maxrss``: Linux carries
    that across ``exec``, so a child would report its parent's peak at fork time."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def mongo_examined(facts: int) -> dict:
    """Per operation on the Mongo emulation: queries, documents examined and matched."""
    from testkit.admin_store import PROBE, add_probe, bulk_documents, write_bulk
    from usecases.cost import cost_report
    from pipeline.clock import FrozenClock
    from pipeline.export import export_user
    from pipeline.forgetting import forget_user, verify_erasure
    from pipeline.llm.offline import OfflineLLM
    from pipeline.store.mongo import MongoStore
    from testkit.mongo_emulation import emulated_database
    from testkit.mongo_explain import EXPLAIN

    settings = _settings(Path("unused.db"))
    store = MongoStore(emulated_database())
    write_bulk(store, bulk_documents(facts))
    store.create_indexes()
    clock = FrozenClock()
    add_probe(store, settings, clock, agent_id=PROBE_AGENT)
    steps = {
        "export": lambda: list(export_user(store, PROBE)),
        "cost": lambda: cost_report(store, PROBE_AGENT, since=clock.now() - timedelta(days=1)),
        "forget": lambda: forget_user(store, PROBE, settings=settings, llm=OfflineLLM(settings)),
        "verify": lambda: verify_erasure(store, PROBE),
    }
    out = {}
    for name, step in steps.items():
        EXPLAIN.queries.clear()
        EXPLAIN.on = True
        try:
            step()
        finally:
            EXPLAIN.on = False
        queries = list(EXPLAIN.queries)
        out[name] = {"queries": len(queries), "examined": sum(q.examined for q in queries),
                     "matched": sum(q.returned for q in queries),
                     "worst_ratio": round(max((q.examined / (q.returned + 10) for q in queries), default=0), 2)}
    out["documents"] = sum(store.col(n).count_documents({}) for n in ("facts", "messages", "runs", "sessions",
                                                                         "reflections", "contexts"))
    return out


def _child(db: Path, operation: str, *extra: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "bench.admin_scale", "--run", operation, "--db", str(db), *extra],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{operation} failed on {db}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", default="10000,100000", help="store sizes, comma-separated (default 10000,100000)")
    parser.add_argument("--mongo", action="store_true",
                        help="also count the documents examined on the MongoDB emulation at the first size")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each read (export, stats, cost, context), the median reported (default 3)")
    parser.add_argument("--run", choices=(*OPERATIONS, "build"), help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run == "build":  # in its own process: the bench's parent stays small
        print(json.dumps({"seconds": round(build(args.db, int(args.facts)), 1)}))
        return 0
    if args.run:
        print(json.dumps(run_operation(args.db, args.run)))
        return 0
    try:
        sizes = [int(s) for s in args.facts.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if args.repeat < 1:
        print(f"--repeat: expected at least 1, got {args.repeat}", file=sys.stderr)
        return 2
    if not sizes or min(sizes) < 10:
        print(f"--facts: expected sizes of at least 10 facts, comma-separated (e.g. 10000,100000), got {args.facts!r}",
              file=sys.stderr)
        return 2
    result: dict = {"store": "sqlite", "repeat": args.repeat, "sizes": {},
                    "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="admin-scale-") as where:
        for facts in sizes:
            db = Path(where) / f"store-{facts}.db"
            built = _child(db, "build", "--facts", str(facts))
            row = {"build_s": built["seconds"], "db_mb": round(db.stat().st_size / 1e6, 1)}
            for operation in OPERATIONS:
                # the reads again in fresh processes, the median kept: one sample of a few ms on
                # a shared machine is the scheduler's; forget and verify change the store, once
                times = args.repeat if operation in READS else 1
                samples = [_child(db, operation) for _ in range(times)]
                row[operation] = {**sorted(samples, key=lambda r: r["seconds"])[len(samples) // 2],
                                  "samples_s": [r["seconds"] for r in samples]}
            result["sizes"][str(facts)] = row
            print(f"admin_scale: {facts} facts done", file=sys.stderr, flush=True)
    if args.mongo:
        result["mongo_emulation"] = {"facts": sizes[0], **mongo_examined(sizes[0])}
    first, last = result["sizes"][str(sizes[0])], result["sizes"][str(sizes[-1])]
    result["growth"] = {op: round(last[op]["seconds"] / max(first[op]["seconds"], 1e-4), 2) for op in OPERATIONS}
    result["aims"] = {"growth_at_most_2x": {op: g <= 2 for op, g in result["growth"].items()},
                      "forget_and_export_under_1s": all(last[op]["seconds"] < 1 for op in ("forget", "export")),
                      "peak_rss_under_200mb": all(last[op]["peak_rss_mb"] < 200 for op in OPERATIONS)}
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
