"""Broker outage (issue: reliability §6): Redis with ``--appendonly yes --appendfsync always``
is restarted in the middle of ingest: stopped (SIGTERM, as ``docker restart`` does) or, with
``crash=True``, SIGKILLed. Every publish the producer was told succeeded
must end up stored; every other publish must have raised a clear error.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from pathlib import Path

from testkit.scenarios.fuzz import good_event
from testkit.scenarios.harness import (
    PersistentRedis, Supervisor, producer_app, queues_idle, start_worker, wait_until, worker_env,
)
from testkit.waiting import settle, store_state
from pipeline.errors import TransientError

AGENT = "agent-outage"


def _aof_commands(directory: Path) -> list[list[bytes]]:
    """Every command of the append-only file, in order (RESP arrays of bulk strings)."""
    cmds: list[list[bytes]] = []
    for path in sorted((directory / "appendonlydir").glob("*.incr.aof")):
        data, i = path.read_bytes(), 0
        while i < len(data):
            if data[i:i + 1] != b"*":
                i = data.find(b"\n", i) + 1 or len(data)
                continue
            j = data.find(b"\r\n", i)
            count, i, args = int(data[i + 1:j]), j + 2, []
            for _ in range(count):
                j = data.find(b"\r\n", i)
                size, i = int(data[i + 1:j]), j + 2
                args.append(data[i:i + size])
                i += size + 2
            cmds.append(args)
    return cmds


def unanswered_pops(directory: Path, queue: bytes = b"ingest") -> set[str]:
    """Event ids whose pop Redis wrote to its append-only file while no delivery record
    (the consumer's ZADD of its tag) followed before the server stopped: pops it never
    answered, or whose answer was lost with the connection. A new server lifetime starts its
    writes with SELECT."""
    import base64
    from collections import deque

    def ids(raw: bytes) -> tuple[str, str]:
        message = json.loads(raw)
        body = json.loads(base64.b64decode(message["body"]))
        return body[1]["event"]["event_id"], message["properties"]["delivery_tag"]

    pending: dict[str, str] = {}   # delivery tag -> event id, popped in this lifetime
    out: dict[str, str] = {}       # the same, popped in a lifetime that ended before its record
    items: deque = deque()
    for cmd in _aof_commands(directory):
        op = cmd[0].upper()
        if op == b"SELECT":
            out.update(pending)
            pending.clear()
        elif op == b"LPUSH" and cmd[1] == queue:
            items.extendleft(cmd[2:])
        elif op == b"RPUSH" and cmd[1] == queue:
            items.extend(cmd[2:])
        elif op == b"RPOP" and cmd[1] == queue and items:
            event_id, tag = ids(items.pop())
            pending[tag] = event_id
        elif op == b"ZADD" and cmd[1] == b"unacked_index":
            # a consumer that got the reply records it, after the restart if need be
            pending.pop(cmd[-1].decode(), None)
            out.pop(cmd[-1].decode(), None)
    return set(out.values())


def run_broker_outage(
    workdir: Path, *, events: int = 300, sessions: int = 6, downtimes: tuple[float, ...] = (1.5, 6.0), crash: bool = False,
    publish_gap_s: float = 0.01, seed: int = 0,
) -> dict:
    from workers.producer import CeleryPublisher

    workdir = Path(workdir)
    rng = random.Random(seed)
    store_url = f"sqlite:///{workdir / 'memory.db'}"
    settings = dict(
        broker_visibility_timeout_s=5, task_retry_backoff_max_s=2, formation_message_interval=10**6, formation_token_interval=10**9,
        llm_provider="offline", embedding_provider="hashing",
    )
    redis = PersistentRedis(workdir / "redis")
    supervisor = None
    try:
        # like the compose file's restart policy: a worker that exits is started again
        supervisor = Supervisor(lambda n: start_worker(
            broker_url=redis.url(0), store_url=store_url, log_file=workdir / f"worker-{n}.log",
            queues=("ingest",), app="testkit.scenarios.worker_app", env=worker_env(**settings),
        ))
        app = producer_app(redis.url(0), **settings)
        publisher = CeleryPublisher(app=app, retry_max=3, timeout_s=1.0)
        produced = _Producer(publisher, rng, [f"outage-{seed}-{i}" for i in range(sessions)], seed, publish_gap_s)
        producer = threading.Thread(target=produced.run, args=(events,), name="producer")
        producer.start()
        # a short outage the producer's retries ride out, a long one they report
        for k, down_for_s in enumerate(downtimes):
            done = events * (k + 1) // (len(downtimes) + 1)
            wait_until(lambda: produced.answered() >= done, timeout=60)
            redis.restart(down_for_s=down_for_s, sig=signal.SIGKILL if crash else signal.SIGTERM)
        producer.join(timeout=300)
        publisher.close()
        drained, stored = _drained(workdir, redis)
        told_accepted, errors, other_exceptions = produced.told_accepted, produced.errors, produced.other_exceptions
        lost = sorted(set(told_accepted) - stored)
        unanswered = unanswered_pops(redis.workdir)
        return {
            "publish_calls": events,
            "told_accepted": len(told_accepted),
            "clear_errors": len(errors),
            "unclear_errors": len(other_exceptions),
            "stored": len(stored & set(told_accepted)),
            "lost": len(lost),
            "lost_sample": lost[:5],
            # lost because Redis persisted their pop and stopped before it answered it
            "lost_to_unanswered_pops": len(set(lost) & unanswered),
            "lost_unexplained": len(set(lost) - unanswered),
            "error_sample": errors[:2] + other_exceptions[:2],
            "redis_restarts": redis.restarts,
            "restart_signal": "SIGKILL" if crash else "SIGTERM",
            "drained": drained,
            "worker_crashes": supervisor.crashes,
            "worker_crash_reasons": supervisor.reasons(),
        }
    finally:
        if supervisor is not None:
            supervisor.stop()
        redis.stop()


class _Producer:
    """Publishes ``events`` good events over the sessions, one every ``gap_s``, and keeps what
    each publish call told its caller."""

    def __init__(self, publisher, rng: random.Random, session_ids: list[str], seed: int, gap_s: float) -> None:
        self.publisher, self.rng, self.session_ids, self.seed, self.gap_s = publisher, rng, session_ids, seed, gap_s
        self.told_accepted: list[str] = []
        self.errors: list[str] = []
        self.other_exceptions: list[str] = []

    def answered(self) -> int:
        return len(self.told_accepted) + len(self.errors) + len(self.other_exceptions)

    def run(self, events: int) -> None:
        for n in range(events):
            event = good_event(self.rng, AGENT, self.rng.choice(self.session_ids), n)
            event["event_id"] = f"outage-{self.seed}-e{n}"
            try:
                self.publisher.publish_one(event)
                self.told_accepted.append(event["event_id"])
            except TransientError as exc:
                self.errors.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - counted: an unclear error is a finding
                self.other_exceptions.append(f"{type(exc).__name__}: {exc}")
            time.sleep(self.gap_s)


def _drained(workdir: Path, redis) -> tuple[bool, set[str]]:
    """Whether the ingest queue drained, and the event ids the store holds then."""
    from pipeline.store.sqlite import SQLiteStore

    store = SQLiteStore(str(workdir / "memory.db"))
    try:
        # while events are still being stored, however slowly; not once the store stands still
        drained = settle(lambda: queues_idle(redis.client(0), ("ingest",)), lambda: store_state(store),
                         interval=0.25)
        stored = {m["event_id"] for m in store.admin.dump_all().get("messages", [])}
    finally:
        store.close()
    return drained, stored
