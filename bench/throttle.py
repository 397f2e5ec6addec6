"""``python -m bench.throttle``: two formation worker processes and a producer against a
wire-level fake provider, under a shared request limit well below what the workers could send.

A real ``redis-server`` (the broker, and the limit's state), SQLite, the hashing embedder, one
ingest worker and two formation worker processes (threads pool) running the real OpenAI adapter
against ``testkit.llm_server`` (each chat call answered with the smallest answer its
``response_format`` schema admits, after ``--latency`` seconds), and
``MEMORY_LLM_RATE_LIMITS={"openai": {"rpm": --limit}}``. The producer publishes ``--sessions``
sessions, all claimed and started at once: far more calls are ready than the limit lets through.

The fake server stamps every chat call it receives. The last line is JSON with
``limit_per_minute``, ``max_calls_in_any_minute`` (over every rolling 60 s window of those
stamps), ``calls_per_minute_sustained`` (calls after the first, over the time from the first to
the last, per minute), the calls, the shortest gap between two calls, the runs done and the
load average. The aim: no minute over
the limit, sustained ≥ 80 % of it. With the defaults it takes about 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.formation import FORMATION_QUEUES, INGEST_QUEUES, events, running, start_formations, wait_done
from testkit import llm_wire as wire
from testkit.llm_server import LLMServer
from testkit.procs import RedisServer, WorkerProcess


def smallest(schema: dict, defs: dict) -> Any:
    """The smallest instance of a JSON schema as Structured Outputs send them (objects with
    every property required, arrays, strings, numbers, booleans, ``$ref`` into ``$defs``)."""
    if "$ref" in schema:
        return smallest(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return smallest(schema["anyOf"][0], defs)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {name: smallest(sub, defs) for name, sub in schema.get("properties", {}).items()}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False, "null": None}.get(kind)


class PacedServer(LLMServer):
    """The wire-level fake provider, answering every chat call after ``latency`` seconds with
    the smallest answer its schema admits, and stamping when each arrived."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency
        self.stamps: list[float] = []
        self._stamp_lock = threading.Lock()

    def _chat(self, body: Any) -> tuple[int, dict, dict]:
        with self._stamp_lock:
            self.stamps.append(time.time())
        refusal = wire.check_chat(body)
        if refusal is not None:  # (status, body): the real server's refusal
            return refusal[0], refusal[1], {}
        time.sleep(self.latency)
        schema = body["response_format"]["json_schema"]["schema"]
        text = json.dumps(smallest(schema, schema.get("$defs", {})))
        return 200, wire.chat_completion(text, model=body["model"], finish_reason="stop",
                                         usage=(300, 20)), {}


def max_in_window(stamps: list[float], window: float = 60.0) -> int:
    """The most stamps in any half-open window ``[t, t + window)``."""
    stamps, best, start = sorted(stamps), 0, 0
    for end, at in enumerate(stamps):
        while at - stamps[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def run(args: argparse.Namespace, say) -> dict:
    from pipeline.store.sqlite import SQLiteStore
    from schemas.settings import Settings
    from testkit.scenarios.harness import producer_app
    from workers.producer import CeleryPublisher, publish_messages

    server = PacedServer(args.latency).start()
    with tempfile.TemporaryDirectory(prefix="bench-throttle-") as tmp:
        tmp_path = Path(tmp)
        redis = RedisServer(tmp_path / "redis")
        db = tmp_path / "memory.db"
        store = SQLiteStore(str(db))
        store.create_indexes()
        env = {"MEMORY_EMBEDDING_PROVIDER": "hashing", "MEMORY_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-test",
               "MEMORY_OPENAI_BASE_URL": server.openai_base_url, "MEMORY_OPENAI_STRUCTURED_OUTPUT": "json_schema",
               "MEMORY_LLM_RATE_LIMITS": json.dumps({"openai": {"rpm": args.limit}})}

        def worker(name: str, queues, concurrency: int) -> WorkerProcess:
            return WorkerProcess(broker_url=redis.url(0), result_backend=redis.url(1), store_url=f"sqlite:///{db}",
                                 log_file=tmp_path / f"{name}.log", queues=queues, pool="threads",
                                 concurrency=concurrency, loglevel="WARNING", extra_env=env)

        workers = [worker("ingest", INGEST_QUEUES, 4)] + [worker(f"formation-{i}", FORMATION_QUEUES, 8)
                                                           for i in range(2)]
        sessions = [f"throttle-{i}" for i in range(args.sessions)]
        try:
            with running(workers):
                app = producer_app(redis.url(0))
                publisher = CeleryPublisher(app=app)
                publish_messages([e for s in sessions for e in events(s, f"u-{s}")], publisher=publisher)
                start_formations(store, app, sessions, Settings(_env_file=None).claim_lease_s)
                say(f"{len(sessions)} sessions started; limit {args.limit} calls a minute over 2 worker processes")
                runs = wait_done(store, sessions, args.timeout)
                publisher.close()
        finally:
            store.close()
            redis.stop()
            server.close()
    stamps = sorted(server.stamps)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return {"limit_per_minute": args.limit, "max_calls_in_any_minute": max_in_window(stamps),
            "calls_per_minute_sustained": round((len(stamps) - 1) / span * 60, 1) if span else 0.0,
            "calls": len(stamps), "seconds": round(span, 1),
            "min_gap_s": round(min((b - a for a, b in zip(stamps, stamps[1:])), default=0.0), 3), "runs_done": sum(r.status == "done" for r in runs),
            "latency_s": args.latency, "load_avg": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.throttle", description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=30, help="requests per minute the provider allows")
    parser.add_argument("--sessions", type=int, default=32, help="sessions formed at once")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the fake provider takes per call")
    parser.add_argument("--timeout", type=float, default=170.0, help="seconds to wait for every run")
    args = parser.parse_args(argv)
    if args.limit < 1 or args.sessions < 1:
        parser.error("--limit and --sessions: at least 1")
    say = (lambda *a: print(*a, file=sys.stderr))
    print(json.dumps(run(args, say)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
