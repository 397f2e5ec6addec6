"""Broker outage (issue: reliability §6): Redis with ``--appendonly yes --appendfsync always``
is killed and restarted in the middle of ingest. Every publish the producer was told succeeded
must end up stored; every other publish must have raised a clear error.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from ops.bench._fuzz import good_event
from ops.bench._harness import (
    PersistentRedis, Supervisor, producer_app, queues_idle, start_worker, wait_until, worker_env,
)
from pipeline.errors import TransientError

AGENT = "agent-outage"


def run_broker_outage(
    workdir: Path, *, events: int = 300, sessions: int = 6, downtimes: tuple[float, ...] = (1.5, 6.0),
    publish_gap_s: float = 0.01, seed: int = 0, drain_timeout_s: float = 60.0,
) -> dict:
    from pipeline.store.sqlite import SQLiteStore
    from workers.producer import CeleryPublisher

    workdir = Path(workdir)
    rng = random.Random(seed)
    store_url = f"sqlite:///{workdir / 'memory.db'}"
    settings = dict(
        broker_visibility_timeout_s=5, formation_message_interval=10**6, formation_token_interval=10**9,
        llm_provider="offline", embedding_provider="hashing",
    )
    redis = PersistentRedis(workdir / "redis")
    supervisor = None
    try:
        # like the compose file's restart policy: a worker that exits is started again
        supervisor = Supervisor(lambda n: start_worker(
            broker_url=redis.url(0), store_url=store_url, log_file=workdir / f"worker-{n}.log",
            queues=("ingest",), app="ops.bench._worker_app", env=worker_env(**settings),
        ))
        app = producer_app(redis.url(0), **settings)
        publisher = CeleryPublisher(app=app, retry_max=3, timeout_s=1.0)
        told_accepted: list[str] = []
        errors: list[str] = []
        other_exceptions: list[str] = []
        session_ids = [f"outage-{seed}-{i}" for i in range(sessions)]

        def produce() -> None:
            for n in range(events):
                event = good_event(rng, AGENT, rng.choice(session_ids), n)
                event["event_id"] = f"outage-{seed}-e{n}"
                try:
                    publisher.publish_one(event)
                    told_accepted.append(event["event_id"])
                except TransientError as exc:
                    errors.append(str(exc))
                except Exception as exc:  # noqa: BLE001 - counted: an unclear error is a finding
                    other_exceptions.append(f"{type(exc).__name__}: {exc}")
                time.sleep(publish_gap_s)

        producer = threading.Thread(target=produce, name="producer")
        producer.start()
        # a short outage the producer's retries ride out, a long one they report
        for k, down_for_s in enumerate(downtimes):
            done = events * (k + 1) // (len(downtimes) + 1)
            wait_until(lambda: len(told_accepted) + len(errors) + len(other_exceptions) >= done, timeout=60)
            redis.restart(down_for_s=down_for_s)
        producer.join(timeout=300)
        publisher.close()
        drained = wait_until(lambda: queues_idle(redis.client(0), ("ingest",)), timeout=drain_timeout_s, interval=0.25)

        store = SQLiteStore(str(workdir / "memory.db"))
        try:
            stored = {m["event_id"] for m in store.dump_all().get("messages", [])}
        finally:
            store.close()
        lost = sorted(set(told_accepted) - stored)
        return {
            "publish_calls": events,
            "told_accepted": len(told_accepted),
            "clear_errors": len(errors),
            "unclear_errors": len(other_exceptions),
            "stored": len(stored & set(told_accepted)),
            "lost": len(lost),
            "lost_sample": lost[:5],
            "error_sample": errors[:2] + other_exceptions[:2],
            "redis_restarts": redis.restarts,
            "drained": drained,
            "worker_crashes": supervisor.crashes,
            "worker_crash_reasons": supervisor.reasons(),
        }
    finally:
        if supervisor is not None:
            supervisor.stop()
        redis.stop()
