"""Soak: the compose worker layout under a steady producer, watched for leaks.

    python -m bench.soak --minutes 4                 # 20 messages/s over 300 sessions
    python -m bench.soak --minutes 8 --sample-s 15 --rate 40

Runs one worker per queue class as ``docker-compose.yml`` defines them (its pool and
concurrency; a prefork pool is capped at the machine's cores) and one beat, as real processes
on a real ``redis-server``, with a SQLite store, the offline LLM and the hashing embedder. A
producer publishes ``--rate`` messages a second spread over ``--sessions`` live sessions, the
turns of the LoCoMo conversations (``--data``, read at run time; the demo conversation when
the file is missing); a session ends after 20 to 60 messages and a new one takes its place
(the first sessions start part-way through, so sessions end, and form, from the first minute).

Every ``--sample-s`` seconds it samples the resident memory (all of it, and the heap alone:
SQLite's memory-mapped reads add file pages to RSS as the database grows) and the open file
handles (``/proc/<pid>/fd``) of every worker process (the main process and its pool
children) and of beat. After the warm-up minute it fits a line to each and prints the slopes (MB/min and
handles/min), and the heap's slope and the handles' range over the last half: the aim is under
0.25 MB/min and handles flat (within 2). The last line is the JSON of the figures, with events
published vs stored and the load average; ``--keep DIR`` also keeps every sample
(``DIR/samples.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from testkit.procstat import open_handles, rss_mb
from testkit.procs import REPO_ROOT, RedisServer, WorkerProcess
from testkit.soak import DEMO, LOCOMO, compose_workers, slope, turns

SETTINGS = {"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"}
WARM_UP_S = 60.0


class Producer(threading.Thread):
    """``rate`` messages a second over ``sessions`` live sessions; a session ends after 20-60
    messages and a fresh one replaces it."""

    def __init__(self, publisher, texts: list[str], rate: float, sessions: int, seed: int = 0) -> None:
        super().__init__(name="producer", daemon=True)
        self.publisher, self.texts, self.rate = publisher, texts, rate
        self.rng = random.Random(seed)
        self.live = [self._new(i) for i in range(sessions)]
        for s in self.live:  # part-way through, so ends (and formations) are spread from the start
            s["sent"] = self.rng.randrange(s["length"])
        self.next_id = sessions
        self.published = self.errors = self.ended = 0
        self.stop = threading.Event()

    def _new(self, n: int) -> dict:
        return {"id": f"soak-{n:06d}", "user": f"user-{n % 97}", "agent": f"agent-{n % 3}", "sent": 0,
                "length": self.rng.randint(20, 60), "cursor": self.rng.randrange(len(self.texts))}

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            slot = self.rng.randrange(len(self.live))
            s = self.live[slot]
            n = s["sent"]
            event = {
                "type": "message.added", "schema_version": 1, "event_id": f"{s['id']}-e{n}",
                "agent_id": s["agent"], "session_id": s["id"], "session_users": [s["user"]],
                "message": {"message_id": f"{s['id']}-m{n}", "role": "user" if n % 2 == 0 else "assistant",
                            "content": self.texts[(s["cursor"] + n) % len(self.texts)][:2000],
                            "created_at": datetime.now(timezone.utc).isoformat(),
                            **({"sender_id": s["user"]} if n % 2 == 0 else {})},
            }
            try:
                self.publisher.publish_one(event)
                self.published += 1
            except Exception:  # noqa: BLE001 - counted; the broker is local and should not refuse
                self.errors += 1
            s["sent"] += 1
            if s["sent"] >= s["length"]:
                self.publisher.publish_one({"type": "session.ended", "schema_version": 1,
                                            "event_id": f"{s['id']}-end", "agent_id": s["agent"], "session_id": s["id"]})
                self.ended += 1
                self.live[slot] = self._new(self.next_id)
                self.next_id += 1
            wait = started + self.published / self.rate - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)


def _processes(workers: dict[str, WorkerProcess], beat: subprocess.Popen) -> dict[str, int]:
    out = {"beat": beat.pid}
    for name, worker in workers.items():
        out[name] = worker.pid
        for k, child in enumerate(sorted(worker.child_pids())):
            out[f"{name}/child-{k}"] = child
    return out


def run(minutes: float, sample_s: float, rate: float, sessions: int, data: Path, workdir: Path,
        warm_up_s: float = WARM_UP_S, trace_dir: Path | None = None, trace_every_s: float = 120.0) -> dict:
    from testkit.scenarios.harness import producer_app, queues_idle, wait_until
    from pipeline.store.sqlite import SQLiteStore
    from workers.producer import CeleryPublisher

    db = workdir / "memory.db"
    store = SQLiteStore(str(db))
    store.create_indexes()
    layout = compose_workers()
    texts = turns(data)
    settings = dict(SETTINGS)
    if trace_dir is not None:  # heap snapshots and descriptor listings of every worker process
        settings.update({"MEMORY_TRACEMALLOC_DIR": str(trace_dir.resolve()),
                         "MEMORY_TRACEMALLOC_EVERY_S": str(trace_every_s)})
    with RedisServer(workdir / "redis") as redis:
        env = {**os.environ, **settings, "MEMORY_BROKER_URL": redis.url(0), "MEMORY_RESULT_BACKEND": redis.url(1),
               "MEMORY_STORE_URL": f"sqlite:///{db}",
               "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        workers = _start_workers(layout, redis, db, workdir, settings)
        beat, beat_log = _start_beat(workdir, env)
        publisher = None
        try:
            for worker in workers.values():
                worker.wait_ready()
            publisher = CeleryPublisher(app=producer_app(redis.url(0)), retry_max=3, timeout_s=5.0)
            producer = Producer(publisher, texts, rate, sessions)
            started = time.monotonic()
            producer.start()
            samples = _sample(workers, beat, producer, started, minutes, sample_s)
            producer.stop.set()
            producer.join(timeout=30)
            drained = wait_until(lambda: queues_idle(redis.client(0), ("ingest",)), timeout=120, interval=1.0)
            stored = store.db.conn().execute(f"SELECT COUNT(*) FROM {store.db.t('messages')}").fetchone()[0]
            runs = dict(store.db.conn().execute(
                f"SELECT status, COUNT(*) FROM {store.db.t('runs')} GROUP BY status").fetchall())
        finally:
            if publisher is not None:
                publisher.close()
            beat.terminate()
            beat.wait(timeout=20)
            beat_log.close()
            for worker in workers.values():
                worker.stop()
            store.close()
    (workdir / "samples.json").write_text(json.dumps(samples))  # (t, rss, handles, heap) per process
    per_process = {name: _trend(points, warm_up_s) for name, points in samples.items()}
    return {
        "minutes": minutes, "rate_per_s": rate, "sessions": sessions, "data": str(data if data.exists() else DEMO),
        "layout": layout, "warm_up_s": warm_up_s, "sample_s": sample_s, "processes": per_process,
        "events_published": producer.published, "events_stored": stored, "publish_errors": producer.errors,
        "sessions_ended": producer.ended, "runs_by_status": runs, "drained": drained,
        "max_rss_mb_per_min": max((p["rss_mb_per_min"] or 0 for p in per_process.values()), default=None),
        "max_anon_mb_per_min": max((p["anon_mb_per_min"] or 0 for p in per_process.values()), default=None),
        "max_handles_per_min": max((p["handles_per_min"] or 0 for p in per_process.values()), default=None),
        "max_anon_mb_per_min_last_half": max((p["anon_mb_per_min_last_half"] or 0 for p in per_process.values()),
                                             default=None),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }



def _start_workers(layout: list[dict], redis: RedisServer, db: Path, workdir: Path,
                   settings: dict[str, str]) -> dict[str, WorkerProcess]:
    """One worker process per compose service, each on its queues, pool and concurrency."""
    return {w["name"]: WorkerProcess(
        broker_url=redis.url(0), result_backend=redis.url(1), store_url=f"sqlite:///{db}",
        log_file=workdir / f"worker-{w['name']}.log", queues=w["queues"], pool=w["pool"],
        concurrency=w["concurrency"], extra_env=settings) for w in layout}


def _start_beat(workdir: Path, env: dict[str, str]):
    """Celery beat as compose runs it, logging to ``beat.log``: (process, log file)."""
    beat_log = open(workdir / "beat.log", "wb")
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers.app", "beat", "--schedule", str(workdir / "celerybeat-schedule"),
         "--pidfile", str(workdir / "celerybeat.pid"), "--loglevel", "INFO"],
        cwd=REPO_ROOT, env=env, stdout=beat_log, stderr=subprocess.STDOUT, start_new_session=True)
    return beat, beat_log


def _sample(workers: dict, beat, producer, started: float, minutes: float, sample_s: float) -> dict:
    """Every ``sample_s`` until ``minutes`` have passed: (t, rss, handles, heap) of each process."""
    samples: dict[str, list[tuple[float, float, float, float]]] = {}  # t, rss, handles, anon
    while time.monotonic() - started < minutes * 60:
        t = time.monotonic() - started
        for name, pid in _processes(workers, beat).items():
            rss, anon, fds = rss_mb(pid), rss_mb(pid, "RssAnon"), open_handles(pid)
            if rss is not None and anon is not None and fds is not None:
                samples.setdefault(name, []).append((t, rss, fds, anon))
        print(f"t={t:6.0f}s published={producer.published} "
              + " ".join(f"{n}={v[-1][1]:.0f}MB({v[-1][3]:.0f}heap)/{v[-1][2]:.0f}fd"
                         for n, v in samples.items() if v), flush=True)
        time.sleep(max(0.0, sample_s - (time.monotonic() - started - t)))
    return samples


def _trend(points: list[tuple[float, float, float, float]], warm_up_s: float) -> dict:
    """One process's first and last figures and their slopes after the warm-up."""
    warm = [p for p in points if p[0] >= warm_up_s]
    # a one-off step (a first task loading its modules, a thread pool's last threads starting)
    # tilts a short fit; the change over the last half of the run shows whether it goes on
    half = [p for p in warm if p[0] >= (warm[0][0] + warm[-1][0]) / 2] if warm else []
    return {
        "rss_mb_first": round(points[0][1], 1), "rss_mb_last": round(points[-1][1], 1),
        "handles_first": int(points[0][2]), "handles_last": int(points[-1][2]),
        "rss_mb_per_min": slope([(t, r) for t, r, _, _ in warm]),
        "anon_mb_first": round(points[0][3], 1), "anon_mb_last": round(points[-1][3], 1),
        "anon_mb_per_min": slope([(t, a) for t, _, _, a in warm]),
        "handles_per_min": slope([(t, f) for t, _, f, _ in warm]),
        "rss_mb_last_half": round(half[-1][1] - half[0][1], 1) if half else None,
        "handles_last_half": int(half[-1][2] - half[0][2]) if half else None,
        # the aim (docs/benchmarks.md "Soak"): heap under 0.25 MB/min and handles flat (+-2) over the last half
        "anon_mb_per_min_last_half": slope([(t, a) for t, _, _, a in half]),
        "handles_min_max_last_half": [int(min(f for _, _, f, _ in half)), int(max(f for _, _, f, _ in half))]
        if half else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--rate", type=float, default=20.0, help="messages published per second")
    parser.add_argument("--sessions", type=int, default=300, help="live sessions at any time")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo dev.json (or a JSONL of events)")
    parser.add_argument("--warm-up-s", type=float, default=WARM_UP_S, help="seconds left out of the slopes")
    parser.add_argument("--keep", type=Path, default=None, help="keep the store and logs in this directory")
    parser.add_argument("--trace-dir", type=Path, default=None,
                        help="workers write tracemalloc snapshots and descriptor listings here "
                             "(workers.memtrace; compare two with python -m bench.memdiff); slows them")
    parser.add_argument("--trace-every-s", type=float, default=120.0, help="seconds between snapshots")
    args = parser.parse_args(argv)
    trace = {"trace_dir": args.trace_dir, "trace_every_s": args.trace_every_s}
    options = (args.minutes, args.sample_s, args.rate, args.sessions, args.data)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        figures = run(*options, args.keep, warm_up_s=args.warm_up_s, **trace)
    else:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            figures = run(*options, Path(tmp), warm_up_s=args.warm_up_s, **trace)
    for name, p in figures["processes"].items():
        print(f"{name:<22} rss {p['rss_mb_first']:>6} -> {p['rss_mb_last']:>6} MB ({p['rss_mb_per_min']} MB/min, "
              f"{p['rss_mb_last_half']} over the last half; heap {p['anon_mb_first']} -> {p['anon_mb_last']}, "
              f"{p['anon_mb_per_min']} MB/min, {p['anon_mb_per_min_last_half']} over the last half)  "
              f"handles {p['handles_first']:>4} -> {p['handles_last']:>4} "
              f"({p['handles_per_min']}/min, {p['handles_last_half']} over the last half)")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
