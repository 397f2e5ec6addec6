"""Store outage: the store becomes unavailable for several seconds while producers publish and
formations run; every event the producer was told is accepted must be stored, and every run
must finish (design §11: a store outage is retried, never acked and lost).

- ``sqlite``: real Redis and real prefork workers on every queue (``_crash.scenario``), with a
  busy timeout of ``BUSY_TIMEOUT_S``; another process holds ``BEGIN EXCLUSIVE`` for longer
  than that, so every write in that window fails with ``SQLITE_BUSY``.
- ``mongo``: the emulated MongoDB of ``testkit`` lives in one process, so this one runs
  in a subprocess (``python -m testkit.scenarios.store_outage``): real Redis, an in-process Celery
  worker (threads pool) on every queue, and the emulation's ``OUTAGE`` window, which fails
  operations with the driver's own failover errors (some writes apply before their reply is
  lost).

The harness plays beat (the stale-run retry every few seconds). Figures: ``told_accepted``,
``stored``, ``lost`` (accepted, not stored), ``stuck_runs``, ``messages_unformed``,
``duplicate_facts`` (the audit's), ``outage_s`` (how long the store was really unavailable),
``store_errors`` (store errors retried; for Mongo, operations the outage failed) and
``store_errors_by_task`` (proof that it hit ingest and formations alike),
``retried_past_limit`` (ingest retries past the bounded ones: the message stayed queued) and
``left_to_sweep`` (stages whose retries ran out: the stale-run sweep finished their runs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from testkit.scenarios.audit import audit
from testkit.scenarios.workload import end_event, plan_sessions, session_events
from testkit.procs import REPO_ROOT

BUSY_TIMEOUT_S = 2.0
#: the broker redelivers an unacked message after this; the crash scenario's 3 s would also
#: redeliver (and so hide) a message a worker acked away during the outage
VISIBILITY_TIMEOUT_S = 300
MESSAGES = 8

LOCK_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
conn.execute("BEGIN EXCLUSIVE")
print(time.time(), flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
print(time.time(), flush=True)
"""


class _Producer(threading.Thread):
    """Publishes the sessions' events (two batches each, a live chat) at a steady pace and
    counts the message events it was told are accepted."""

    def __init__(self, publisher, plan: list[dict], rng: random.Random, gap_s: float, burst: int = 0) -> None:
        super().__init__(name="producer", daemon=True)
        self.publisher, self.plan, self.rng, self.gap_s, self.burst = publisher, plan, rng, gap_s, burst
        self.accepted: set[str] = set()
        self.errors: list[str] = []

    def run(self) -> None:
        for n, s in enumerate(self.plan):
            events = session_events(self.rng, agent_id=s["agent_id"], session_id=s["session_id"],
                                    users=s["users"], messages=MESSAGES)
            half = len(events) // 2
            for batch in (events[:half], events[half:] + [end_event(s["agent_id"], s["session_id"])]):
                try:
                    self.publisher.publish_batch(batch)
                    self.accepted.update(e["event_id"] for e in batch if e["type"] == "message.added")
                except Exception as exc:  # noqa: BLE001 - counted: the broker, not the store, said no
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                if n >= self.burst:  # the first ``burst`` sessions at once: formations in flight
                    time.sleep(self.gap_s)


def _figures(store, producer: _Producer, settled: bool) -> dict:
    figures = audit(store)
    stored = {m["event_id"] for m in store.admin.dump_all().get("messages", [])}
    lost = sorted(producer.accepted - stored)
    figures.update(
        told_accepted=len(producer.accepted), stored=len(producer.accepted & stored), lost=len(lost),
        messages_not_ingested=len(lost),
        lost_sample=lost[:5], publish_errors=len(producer.errors), settled=settled,
    )
    return figures


def _formations_in_flight(store, timeout_s: float = 30.0) -> None:
    """Until some run is claimed or running, so the outage meets formations mid-chain."""
    from testkit.scenarios.harness import wait_until

    wait_until(lambda: any(r.status in ("claimed", "running") for r in store.runs.list_runs(limit=1000)),
               timeout=timeout_s, interval=0.02)


# ------------------------------------------------------------------ SQLite -------------------------

def run_sqlite_lock(workdir: Path, *, sessions: int = 16, lock_s: float = 10.0, seed: int = 0) -> dict:
    from testkit.scenarios.crash import SCENARIO_SETTINGS, _settle, scenario
    from testkit.scenarios.harness import start_worker, worker_env

    workdir = Path(workdir)
    rng = random.Random(seed)
    env = {"MEMORY_SQLITE_BUSY_TIMEOUT_S": str(BUSY_TIMEOUT_S),
           # longer than the scenario: a message acked away must not come back by the timeout
           "MEMORY_BROKER_VISIBILITY_TIMEOUT_S": str(VISIBILITY_TIMEOUT_S)}
    with scenario(workdir, env) as (store, redis, cluster, app, publisher):
        # formations have a worker of their own, as in the compose file, so they run (and meet
        # the outage) while ingest waits for the lock
        formation = start_worker(broker_url=redis.url(0), store_url=f"sqlite:///{workdir / 'memory.db'}",
                                 log_file=workdir / "worker-formation.log", queues=("formation", "consolidation"),
                                 app="testkit.scenarios.worker_app",
                                 env={**worker_env(**SCENARIO_SETTINGS), **env})
        try:
            producer = _Producer(publisher, plan_sessions(rng, sessions, prefix=f"lock{seed}"), rng, gap_s=0.4,
                                 burst=sessions // 2)
            producer.start()
            _formations_in_flight(store)
            holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(workdir / "memory.db"), str(lock_s)],
                                      stdout=subprocess.PIPE, text=True)
            locked_at = float(holder.stdout.readline())
            released_at = float(holder.stdout.readline())
            holder.wait(timeout=30)
            producer.join(timeout=120)
            settled = _settle(cluster, app, redis, store)
            crashed = not formation.is_alive()
        finally:
            formation.stop()
        figures = _figures(store, producer, settled)
        text = cluster.log_text() + formation.log_text()
        figures.update(
            outage_s=round(released_at - locked_at, 1), busy_timeout_s=BUSY_TIMEOUT_S,
            store_errors=text.count("StoreUnavailable"), store_errors_by_task=_by_task(text),
            retried_past_limit=text.count("stays queued"), left_to_sweep=text.count("stale-run sweep reopens"),
            worker_crashes=cluster.unexpected_exits + crashed + text.count("Unrecoverable error"),
        )
        return figures


def _by_task(log_text: str) -> dict[str, int]:
    """Retries of a store outage per task name, read from the workers' logs."""
    out: dict[str, int] = {}
    for line in log_text.splitlines():
        if "StoreUnavailable" in line and "Task memory." in line:
            name = line.split("Task memory.", 1)[1].split("[", 1)[0]
            out[name] = out.get(name, 0) + 1
    return out


# ------------------------------------------------------------------ MongoDB (emulated) -------------

def run_mongo_failover(workdir: Path, *, sessions: int = 16, outage_s: float = 8.0, seed: int = 0,
                       timeout_s: float = 1800.0) -> dict:
    """Run the Mongo scenario in a fresh interpreter (the emulation and the worker share it).
    ``timeout_s`` only stops a hung interpreter: the scenario itself gives up once its store
    stands still (``testkit.waiting.settle``), however long a loaded machine takes."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "testkit.scenarios.store_outage", "--workdir", str(workdir),
           "--sessions", str(sessions), "--outage-s", str(outage_s), "--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    with open(workdir / "mongo-scenario.log", "wb") as log:
        done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=log, timeout=timeout_s)
    lines = done.stdout.decode().strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (workdir / "mongo-scenario.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the Mongo store-outage scenario failed ({done.returncode}):\n{tail}")
    figures = json.loads(lines[-1])
    figures.update(_mongo_log_figures((workdir / "mongo-scenario.log").read_text(errors="replace")))
    return figures


def _mongo_main(workdir: Path, sessions: int, outage_s: float, seed: int) -> dict:
    from testkit.scenarios.crash import SCENARIO_SETTINGS, _all_formed
    from testkit.scenarios.harness import queues_idle, worker_env
    from testkit.waiting import settle, store_state
    from testkit.procs import RedisServer

    with RedisServer(workdir / "redis") as redis:
        os.environ.update({**worker_env(**SCENARIO_SETTINGS), "MEMORY_BROKER_URL": redis.url(0),
                           "MEMORY_BROKER_VISIBILITY_TIMEOUT_S": str(VISIBILITY_TIMEOUT_S),
                           "MEMORY_RESULT_BACKEND": redis.url(1), "MEMORY_STORE_URL": "mongodb://emulated/memory"})
        from celery.contrib.testing.worker import start_worker

        from pipeline import names
        from pipeline.store.mongo import MongoStore
        from testkit.mongo_emulation import OUTAGE, emulated_database
        from workers.app import app
        from workers.deps import Deps, set_deps
        from workers.producer import CeleryPublisher
        from schemas.settings import get_settings

        deps = Deps(get_settings())
        store = deps.__dict__["store"] = MongoStore(emulated_database())
        store.create_indexes()
        set_deps(deps)
        rng = random.Random(seed)
        with start_worker(app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="INFO",
                          queues=list(names.QUEUES), shutdown_timeout=30):
            publisher = CeleryPublisher(app=app, retry_max=5, timeout_s=5.0)
            producer = _Producer(publisher, plan_sessions(rng, sessions, prefix=f"mongo{seed}"), rng, gap_s=0.4,
                                 burst=sessions // 2)
            producer.start()
            _formations_in_flight(store)
            started = time.monotonic()
            with OUTAGE.during(outage_s):
                time.sleep(outage_s)
            outage = time.monotonic() - started
            producer.join(timeout=120)
            next_retry = 0.0

            def beat() -> None:
                nonlocal next_retry
                if time.monotonic() >= next_retry:  # beat's stale-run retry
                    app.send_task(names.TASK_RETRY_STALE, kwargs={}, ignore_result=True)
                    next_retry = time.monotonic() + 4.0

            ok = settle(lambda: queues_idle(redis.client(0)) and _all_formed(store), lambda: store_state(store),
                        tick=beat)
            publisher.close()
        figures = _figures(store, producer, ok)
        figures.update(outage_s=round(outage, 1), store_errors=sum(OUTAGE.raised.values()),
                       store_errors_by_kind=dict(OUTAGE.raised))
        return figures


def _mongo_log_figures(log_text: str) -> dict:
    return {"store_errors_by_task": _by_task(log_text), "retried_past_limit": log_text.count("stays queued"),
            "left_to_sweep": log_text.count("stale-run sweep reopens"),
            "worker_crashes": log_text.count("Unrecoverable error")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the Mongo store-outage scenario (run by bench.reliability)")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--outage-s", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    figures = _mongo_main(args.workdir, args.sessions, args.outage_s, args.seed)
    print(json.dumps(figures, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
