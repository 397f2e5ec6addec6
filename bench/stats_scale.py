"""Stats and cost against an agent with many runs: the store's sums against listing every run.

    python -m bench.stats_scale                  # 30 and 20,000 runs on SQLite
    python -m bench.stats_scale --runs 30,100000 --repeat 5

Builds a SQLite store with ``--runs`` done runs of one agent, three minutes apart over 100
sessions and 200 users, each with the stage records a real run keeps (the fact extraction's
output, the embedding stage's base64 vectors: about 14 kB a run, as in ``bench.soak``), plus a
usage record per 20 runs, written as an older release wrote them (no roll-ups), then brought
up by the upgrade step's ``rebuild_rollups`` (``backfill_s``), and times, best of ``--repeat``:

- ``stats``: ``MemoryService.get_memory_stats`` for one user and one session (after: the usage
  roll-ups; before: listing every run and usage record and summing in Python, kept here as
  ``_listed_spend``);
- ``cost_1d`` and ``cost_all``: ``usecases.cost.cost_report`` with and without ``since`` = one day
  before the newest run (before: the listing of every run, then the window in Python).

Both ways must give the same sums (checked). Each size of ``--runs`` is built and timed in
turn; ``stats_growth`` is the stats time at the largest size over the smallest (the aim: ≤ 2).
The last line is the JSON of the figures with the load average.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pipeline import cost
from pipeline.cost import price_models
from schemas.documents import FormationRun, LLMUsage, StageRecord, UsageRecord, scope_key

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
PRICES = {"gpt-6-luna": {"input": 0.10, "output": 0.50}, "text-embedding-9": {"input": 0.02, "output": 0.0}}


def _calls(n: int) -> dict:
    return price_models({
        "gpt-6-luna": {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 900 + n, "output_tokens": 120},
        "text-embedding-9": {"kind": "embedding", "provider": "openai", "calls": 1, "input_tokens": 60, "output_tokens": 0},
    }, PRICES)


def build(store, runs: int) -> None:
    vectors = base64.b64encode(os.urandom(6 * 384)).decode()  # six facts' int8 vectors
    facts = [{"text": f"fact {i} of a long enough sentence about the user's plans", "scope": "user"} for i in range(6)]
    with store.db.write() as conn:
        for i in range(runs):
            created = T0 + timedelta(minutes=3 * i)
            done = created + timedelta(seconds=20)
            stages = {
                "extract_facts": StageRecord(status="done", started_at=created, finished_at=done, attempts=1,
                                             output={"facts": facts, "message_ids": [f"m{j}" for j in range(45)]},
                                             usage=LLMUsage(calls=1, by_model=_calls(i % 7))),
                "embed_facts": StageRecord(status="done", started_at=done, finished_at=done, attempts=1,
                                           output={"vectors": vectors, "dedup_vectors": vectors, "model": "text-embedding-9"},
                                           usage=LLMUsage(calls=1, by_model=_calls(1))),
                "decide_facts": StageRecord(status="done", started_at=done, finished_at=done, attempts=1,
                                            output={"decisions": [{"index": j, "op": "ADD"} for j in range(6)]},
                                            usage=LLMUsage(calls=1, by_model=_calls(2))),
            }
            store.runs.put_run_row(conn, FormationRun(
                run_id=f"run-{i:07d}", agent_id="agent-1", session_id=f"s{i % 100}", seq_from=1, seq_to=45,
                reason="threshold", status="done", created_at=created, finished_at=done,
                user_ids=[f"u{i % 200}"], stages=stages))
    for i in range(0, runs, 20):
        store.stats.record_usage(UsageRecord(usage_id=f"use-{i}", agent_id="agent-1", session_id=f"s{i % 100}",
                                       stage="consolidate_session", at=T0 + timedelta(minutes=3 * i), by_model=_calls(3)))


def _listed_spend(store, agent_id: str, user_id: str, session_id: str) -> dict:
    """Cost per scope as ``get_memory_stats`` summed it before: every run and usage record listed."""
    runs = store.runs.list_runs(agent_id=agent_id, limit=10_000_000)
    records = store.stats.list_usage(agent_id)
    theirs = [r for r in runs if user_id in r.user_ids]
    ids = {r.run_id for r in theirs}
    return {
        "agent": cost.of_runs(runs, records),
        "user": cost.of_runs(theirs, (r for r in records if r.run_id in ids)),
        "session": cost.of_runs((r for r in runs if r.session_id == session_id),
                                (r for r in records if r.session_id == session_id)),
    }


def _listed_cost(store, agent_id: str, since: datetime | None) -> dict:
    """``memoryctl cost``'s total as it was summed before: every run listed, the window in Python."""
    rows = []
    for run in store.runs.list_runs(agent_id=agent_id, limit=10_000_000):
        if since is not None and run.created_at < since:
            continue
        rows += [record.usage.by_model for record in run.stages.values() if record.usage.by_model]
    rows += [record.by_model for record in store.stats.list_usage(agent_id, since)]
    return cost.summary(rows)


def _best(fn, repeat: int) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1), value


def run(runs: int, repeat: int, workdir: Path) -> dict:
    from usecases.cost import cost_report
    from pipeline.service import MemoryService
    from pipeline.store.sqlite import SQLiteStore
    from schemas.settings import Settings

    path = workdir / "memory.db"
    store = SQLiteStore(str(path))
    started = time.perf_counter()
    build(store, runs)
    built_s = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    store.rollups.rebuild_rollups()  # the upgrade step (``memoryctl migrate``) of a store made before them
    backfill_s = round(time.perf_counter() - started, 2)
    settings = Settings(_env_file=None, store_url=f"sqlite:///{path}", embedding_provider="hashing")
    service = MemoryService("agent-1", store=store, settings=settings)
    user, session = "u7", "s7"
    newest = T0 + timedelta(minutes=3 * (runs - 1))
    since = newest - timedelta(days=1)

    stats_ms, stats = _best(lambda: service.get_memory_stats(user_id=user, session_id=session), repeat)
    listed_ms, listed = _best(lambda: _listed_spend(store, "agent-1", user, session), repeat)
    for scope, key in (("agent", scope_key("agent")), ("user", scope_key("user", user_id=user)),
                       ("session", scope_key("session", session_id=session))):
        assert stats["scopes"][key]["cost"]["usd"] == listed[scope]["usd"], scope
    figures = {"stats": {"store_sums_ms": stats_ms, "listing_every_run_ms": listed_ms}}
    for name, window in (("cost_1d", since), ("cost_all", None)):
        after_ms, report = _best(lambda: cost_report(store, "agent-1", since=window), repeat)
        before_ms, total = _best(lambda: _listed_cost(store, "agent-1", window), repeat)
        assert report["total"] == total, name
        figures[name] = {"store_sums_ms": after_ms, "listing_every_run_ms": before_ms}
    doc_kb = store.db.conn().execute(f"SELECT avg(length(doc)) FROM {store.db.t('runs')}").fetchone()[0] / 1024
    store.close()
    return {"runs": runs, "run_doc_kb": round(doc_kb, 1), "built_s": built_s, "backfill_s": backfill_s,
            "repeat": repeat, **figures,
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stats_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="30,20000", help="store sizes in runs, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        sizes = sorted({int(part) for part in args.runs.split(",")})
    except ValueError:
        parser.error(f"--runs: expected sizes such as 30,20000, got {args.runs!r}")
    if sizes[0] < 20 or args.repeat < 1:
        parser.error("--runs: at least 20 each; --repeat: at least 1")
    results = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="stats-scale-") as tmp:
            results.append(run(size, args.repeat, Path(tmp)))
    first, last = results[0]["stats"]["store_sums_ms"], results[-1]["stats"]["store_sums_ms"]
    print(json.dumps({"sizes": results, "stats_growth": round(last / max(first, 0.01), 2),
                      "load_avg": [round(x, 2) for x in os.getloadavg()]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
