"""Ingest throughput on a real Redis and a real Celery worker: ``python -m bench.ingest --json``.

One run measures every path with the same number of producer processes and events:

- ``events_per_s``: ``publish_messages`` batches of 100, from the first publish until the store
  holds all N messages;
- ``raw_redis_per_s``: one Redis connection per producer, non-pipelined ``LPUSH`` of the same
  JSON payloads (the ceiling of any Redis-brokered path); ``ratio`` = events / raw;
- ``single_events_per_s``: one event per queue message (``publish_message``), until stored;
- ``noop_task_per_s``: a task that does nothing, on the same worker and broker, until the
  queue is drained and nothing is left unacked; ``single_ratio`` = single / noop.

The worker is ``celery -A workers.app worker -Q ingest --pool prefork -c 2`` on a SQLite store in
a temporary directory. The last line printed is one JSON object.

What it reaches on a shared 2-core machine (Debian 12, Python 3.11), three runs:
``events_per_s`` 3,840–4,400 and ``ratio`` 0.52–0.71, ``single_events_per_s`` 195–205 and
``single_ratio`` 0.58–0.71. Six earlier runs, which counted the store every 20 ms, gave
1,870–3,510 events/s and ratios 0.23–0.61 (0.52, 0.53, 0.23, 0.53, 0.40, 0.61). Before
batches were stored in one transaction it was 840 events/s and a ratio of 0.23–0.47: each
event was its own ``BEGIN IMMEDIATE`` transaction (~0.5 ms) and three statements. Now a batch costs one
transaction and a few statements (``Store.ingest_messages``), and the worker spends about
15 ms of CPU per 100 events (in-process: ~6,500 events per CPU-second, against ~2,500
before), so the worker no longer bounds the batched path: the four
producer processes, Redis and the worker share two cores, and how the load falls on those
cores moves both ``events_per_s`` and ``raw_redis_per_s`` by 2x from run to run (the low ratio
came with the fastest raw path seen, 8,300 LPUSH/s). Retrying ``BEGIN IMMEDIATE`` after
sub-millisecond pauses instead of SQLite's busy handler was measured side by side and did not
help (batches: no gain; one transaction per event: 25% slower, since the polling waiter takes
CPU from the lock holder on two cores), so it is not used.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from testkit.procs import RedisServer, WorkerProcess
from testkit.producers import RAW_KEY, produce

PATHS = ("batch", "raw", "single", "noop")
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def message_fields(path: str, index: int, sessions: int) -> dict[str, Any]:
    """Keyword fields of ``publish_message`` for event ``index`` of a path."""
    user = f"u{index % 7}"
    return {
        "agent_id": "bench-agent",
        "session_id": f"{path}-s{index % sessions}",
        "role": "user" if index % 2 == 0 else "assistant",
        "sender_id": user if index % 2 == 0 else None,
        "session_users": [user],
        "message_id": f"{path}-m{index}",
        "event_id": f"{path}-e{index}",
        "created_at": (T0 + timedelta(seconds=index)).isoformat(),
        "content": f"Message {index}: the launch review moved to Thursday at 10:00, room B{index % 40}.",
    }


def _run_producers(mode: str, broker_url: str, backend_url: str, chunks: list[list[dict]], finished) -> float:
    """Start the producers, release them together, wait until ``finished()``; seconds elapsed."""
    ctx = mp.get_context("spawn")  # the parent holds broker threads: never fork it
    barrier = ctx.Barrier(len(chunks) + 1)
    done = ctx.Queue()
    procs = [
        ctx.Process(target=produce, args=(mode, broker_url, backend_url, chunk, barrier, done), daemon=True)
        for chunk in chunks
    ]
    for proc in procs:
        proc.start()
    try:
        barrier.wait(timeout=120)
        start = time.perf_counter()
        while not finished(done, len(procs)):
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError(f"a {mode} producer failed: exit codes {[p.exitcode for p in procs]}")
            time.sleep(0.02)
        return time.perf_counter() - start
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def until_stored(store, path: str, sessions: int, n: int, timeout: float, client=None):
    """A ``finished`` predicate: the store holds ``n`` messages of this path's sessions.

    With the broker's ``client``, the messages are counted only once no ingest task is queued
    or unacked (acks are late: a task is acked after it stored its events). Counting 10k
    messages takes a few ms, and every 20 ms on two shared cores that took CPU from the
    worker being measured."""
    ids = [f"{path}-s{i}" for i in range(sessions)]
    deadline = time.monotonic() + timeout

    def finished(done, count) -> bool:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: the store did not hold {n} messages within {timeout:.0f} s")
        if client is not None and (client.llen("ingest") or client.hlen("unacked")):
            return False
        return sum(store.ingest.count_messages(s) for s in ids) >= n

    return finished


def measure(
    events: int, producers: int, sessions: int, concurrency: int, timeout: float, *, rounds: int = 2,
    app: str = "workers.app", log=print,
) -> dict[str, Any]:
    from pipeline.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp_name:
        tmp = Path(tmp_name)
        db = tmp / "memory.db"
        with RedisServer(tmp / "redis", databases=4) as redis_server:
            broker, backend = redis_server.url(0), redis_server.url(1)
            store = SQLiteStore(str(db))
            worker = WorkerProcess(
                broker_url=broker, result_backend=backend, store_url=f"sqlite:///{db}",
                log_file=tmp / "worker.log", queues=("ingest",), pool="prefork",
                concurrency=concurrency, loglevel="WARNING", app=app,
            )
            try:
                worker.wait_ready()
                elapsed = _timed_rounds(events, producers, sessions, rounds, timeout, redis_server, store, log)
                results = {path: events / seconds for path, seconds in elapsed.items()}
            finally:
                worker.stop()
                store.close()
    return {
        "events": events,
        "producers": producers,
        "worker": f"prefork -c {concurrency}",
        "rounds": rounds,
        "events_per_s": round(results["batch"], 1),
        "raw_redis_per_s": round(results["raw"], 1),
        "ratio": round(results["batch"] / results["raw"], 3),
        "single_events_per_s": round(results["single"], 1),
        "noop_task_per_s": round(results["noop"], 1),
        "single_ratio": round(results["single"] / results["noop"], 3),
    }



def _timed_rounds(events: int, producers: int, sessions: int, rounds: int, timeout: float, redis_server,
                  store, log) -> dict[str, float]:
    """Seconds each path took for its share of every round, after a warm-up."""
    broker, backend = redis_server.url(0), redis_server.url(1)
    client = redis_server.client(0)

    def drained(done, count) -> bool:
        # acks_late: a task leaves "unacked" only once it has run
        if done.qsize() < count:
            return False
        return client.llen("ingest") == 0 and client.hlen("unacked") == 0

    def producers_done(done, count) -> bool:
        return done.qsize() >= count

    # warm the worker's processes (imports, store connections) before timing
    warm = [[message_fields("warm", i, 1)] for i in range(producers)]
    _run_producers("single", broker, backend, warm, until_stored(store, "warm", 1, producers, 120))
    # The paths take turns, round after round, so a change of load on the machine
    # weighs on every path alike; each path still handles all N events.
    elapsed = dict.fromkeys(PATHS, 0.0)
    bounds = [events * r // rounds for r in range(rounds + 1)]
    for r in range(rounds):
        lo, hi = bounds[r], bounds[r + 1]
        for path in PATHS:
            log(f"round {r + 1}/{rounds}: {path} path, events {lo}..{hi - 1}, {producers} producers")
            items = [message_fields(path, i, sessions) for i in range(lo, hi)]
            chunks = [items[p::producers] for p in range(producers)]
            finished = {
                "batch": until_stored(store, "batch", sessions, hi, timeout, client),
                "single": until_stored(store, "single", sessions, hi, timeout, client),
                "raw": producers_done,
                "noop": drained,
            }[path]
            elapsed[path] += _run_producers(path, broker, backend, chunks, finished)
        client.delete(RAW_KEY)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events per path (default 10000)")
    parser.add_argument("--producers", type=int, default=4, help="producer processes on every path (default 4)")
    parser.add_argument("--sessions", type=int, default=50, help="sessions the events spread over (default 50)")
    parser.add_argument("--concurrency", type=int, default=2, help="worker pool size (default 2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds each path may take")
    parser.add_argument("--rounds", type=int, default=2, help="turns the paths take, N/rounds events each (default 2)")
    parser.add_argument("--app", default="workers.app", help="Celery app module of the worker")
    parser.add_argument("--json", action="store_true", help="print only progress lines and the JSON result")
    args = parser.parse_args(argv)
    log = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    result = measure(
        args.events, args.producers, args.sessions, args.concurrency, args.timeout, rounds=args.rounds, app=args.app, log=log
    )
    if not args.json:
        for key, value in result.items():
            print(f"{key:>20}: {value}")
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
