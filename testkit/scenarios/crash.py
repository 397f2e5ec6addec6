"""Crash scenario (issue: reliability §1) and its control.

Real Redis, real prefork workers on every queue, SQLite, the offline LLM and the hashing
embedder. A worker is SIGKILLed inside each stage, at a kill point armed through
``testkit.scenarios.deps.HookedStore``: the process that reaches the point (after the stage's write)
reports itself and sleeps, and is killed there. Even kills take the pool process only (the
pool replaces it and the broker redelivers at once: acks_late + reject_on_worker_lost); odd
kills take the whole worker, and a fresh one finishes (redelivery after the visibility
timeout). The harness plays beat: it sends the stale-run retry every few seconds.

A kill is *confirmed* when the marker names a process, that process is gone after the kill,
and the run record shows the stage started (attempts >= 1).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from testkit.scenarios.audit import audit
from testkit.scenarios.deps import stage_category
from testkit.scenarios.harness import (
    ALL_QUEUES, PersistentRedis, pid_alive, producer_app, queues_idle, start_worker, wait_until, worker_env,
)
from testkit.scenarios.workload import end_event, plan_sessions, session_events
from testkit.waiting import QUIET_S, settle, store_state
from pipeline import names
from schemas.documents import Stage
from workers.dispatch import send

# (stage, store method after which the process is killed): a partial effect, or a completed
# stage record whose hand-on was never sent
POINTS = (
    (Stage.EXTRACT_FACTS, "update_run_fields"),
    (Stage.EMBED_FACTS, "complete_stage"),
    (Stage.DECIDE_FACTS, "insert_fact"),
    (Stage.EXTRACT_REFLECTIONS, "insert_reflections"),
    (Stage.CONSOLIDATE, "save_blob"),
    (Stage.FINISH, "complete_stage"),
    (Stage.EXTRACT_FACTS, "complete_stage"),
    (Stage.EMBED_FACTS, "start_stage"),
    (Stage.DECIDE_FACTS, "complete_stage"),
    (Stage.EXTRACT_REFLECTIONS, "complete_stage"),
    (Stage.CONSOLIDATE, "mark_absorbed"),
    (Stage.FINISH, "finish_run"),
)
CONTROL_POINTS = ((Stage.DECIDE_FACTS, "insert_fact"), (Stage.DECIDE_FACTS, "complete_stage"))

SCENARIO_SETTINGS = dict(
    broker_visibility_timeout_s=3, claim_lease_s=15, llm_provider="offline", embedding_provider="hashing",
    formation_message_interval=4, formation_token_interval=10**6, min_messages_to_form=4,
    consolidation_threshold_session=2, consolidation_threshold_user=2, consolidation_threshold_agent=3,
    task_max_retries=4, task_retry_backoff_max_s=2, max_run_attempts=10,
    task_soft_time_limit_s=10, task_time_limit_s=12,  # under the 15 s lease (settings validation)
)


class _Cluster:
    """One worker at a time on every queue, restarted by the harness when it kills it."""

    def __init__(self, workdir: Path, broker_url: str, store_url: str, env: dict[str, str]) -> None:
        self.workdir, self.broker_url, self.store_url, self.env = workdir, broker_url, store_url, env
        self.generation = 0
        self.unexpected_exits = 0
        self.logs: list[Path] = []
        self.worker = self._start()

    def _start(self):
        log = self.workdir / f"worker-{self.generation}.log"
        self.logs.append(log)
        return start_worker(broker_url=self.broker_url, store_url=self.store_url, log_file=log,
                            queues=ALL_QUEUES, app="testkit.scenarios.worker_app", env=self.env,
                            concurrency=2)

    def replace_after_kill(self) -> None:
        self.worker.kill_group(signal.SIGKILL)
        self.worker.stop(timeout=1)
        self.generation += 1
        self.worker = self._start()

    def ensure_alive(self) -> None:
        if not self.worker.is_alive():
            self.unexpected_exits += 1
            self.worker.stop(timeout=1)
            self.generation += 1
            self.worker = self._start()

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def stop(self) -> None:
        # after the figures (the logs included) are taken: nothing reads a warm shutdown here
        self.worker.discard()


def publish_session(publisher, events: list, end: dict) -> None:
    """In two batches, as a live chat arrives: the first half forms while the rest comes in."""
    half = len(events) // 2
    publisher.publish_batch(events[:half])
    publisher.publish_batch(events[half:] + [end])


def _open_store(path: Path):
    from pipeline.store.sqlite import SQLiteStore

    return SQLiteStore(str(path))


class Scenario(NamedTuple):
    store: Any
    redis: PersistentRedis
    cluster: _Cluster
    app: Any
    publisher: Any


@contextmanager
def scenario(workdir: Path, env: dict[str, str]) -> Iterator[Scenario]:
    """One scenario's SQLite store, append-only Redis, worker cluster (the scenario settings
    plus ``env``) and producer; all of it stopped and closed afterwards."""
    from workers.producer import CeleryPublisher

    db_path = workdir / "memory.db"
    store = _open_store(db_path)
    store.create_indexes()
    redis = PersistentRedis(workdir / "redis")
    cluster = None
    try:
        cluster = _Cluster(workdir, redis.url(0), f"sqlite:///{db_path}", {**worker_env(**SCENARIO_SETTINGS), **env})
        app = producer_app(redis.url(0), **SCENARIO_SETTINGS)
        yield Scenario(store, redis, cluster, app, CeleryPublisher(app=app, retry_max=5, timeout_s=5.0))
    finally:
        if cluster is not None:
            cluster.stop()
        redis.stop()
        store.close()


def run_crash(
    workdir: Path, *, sessions: int = 50, kills: int = 20, messages: int = 8, seed: int = 0,
    points=POINTS, control: bool = False, fire_quiet_s: float = 15.0, settle_quiet_s: float = QUIET_S,
) -> dict:
    """Run the scenario and return its figures (see ``testkit.scenarios.audit.audit``)."""
    workdir = Path(workdir)
    hooks = workdir / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    env = {"RELIABILITY_MODE": "hooks,sloppy" if control else "hooks", "RELIABILITY_DIR": str(hooks)}
    with scenario(workdir, env) as (store, redis, cluster, app, publisher):
        # the control gives every session its own agent, so no later dedup merges the copies away
        plan = plan_sessions(rng, sessions, prefix=f"crash{seed}", agents=sessions if control else 2)
        queue = list(plan)

        def publish_next(count: int) -> int:
            sent = 0
            while queue and sent < count:
                s = queue.pop(0)
                events = session_events(rng, agent_id=s["agent_id"], session_id=s["session_id"], users=s["users"],
                                        messages=messages)
                publish_session(publisher, events, end_event(s["agent_id"], s["session_id"]))
                sent += 1
            return sent

        def reached(marker: Path) -> bool:
            """The armed point fired; False once the store stood still ``fire_quiet_s`` without
            it (the sessions published so far never reach it), however slowly a loaded machine
            forms them until then."""
            return settle(marker.exists, lambda: store_state(store), quiet_s=fire_quiet_s, confirm_s=0.0, interval=0.1)

        per_kill = max(1, sessions // (kills + 1))
        kill_log: list[dict] = []
        for k in range(kills):
            stage, method = points[k % len(points)]
            (hooks / "arm.json").write_text(json.dumps({"id": k, "stage": stage, "after": method}))
            kill_log.append(_kill_at(k, stage, method, hooks, cluster, store, per_kill=per_kill,
                                     publish_next=publish_next, reached=reached, queue=queue))
        (hooks / "arm.json").unlink(missing_ok=True)
        while queue:
            publish_next(len(queue))

        settled = _settle(cluster, app, redis, store, settle_quiet_s)
        figures = audit(store)
        figures.update(_kill_figures(kill_log, cluster, sessions=sessions, messages=messages, kills=kills,
                                     stored=figures["messages"], settled=settled))
        return figures


def _kill_figures(kill_log: list[dict], cluster, *, sessions: int, messages: int, kills: int, stored: int,
                  settled: bool) -> dict:
    """What the kills did, and the worker crashes the harness did not cause."""
    killed = {k["pid"] for k in kill_log if k.get("fired")}
    text = cluster.log_text()
    # pool processes that died and were not killed by the harness, and workers that stopped
    lost_children = {int(p) for p in re.findall(r"pid:(\d+) exited with", text)} - killed
    return dict(
        messages_published=sessions * messages,
        messages_not_ingested=sessions * messages - stored,
        kills_attempted=kills,
        kills_fired=sum(1 for k in kill_log if k["fired"]),
        kills_confirmed=sum(1 for k in kill_log if k["confirmed"]),
        kills_by_stage=_by_stage(kill_log),
        sessions=sessions,
        settled=settled,
        worker_crashes=cluster.unexpected_exits + len(lost_children) + text.count("Unrecoverable error"),
        kill_log=kill_log,
    )


def _kill_at(k: int, stage: str, method: str, hooks: Path, cluster, store, *, per_kill: int, publish_next,
             reached, queue: list) -> dict:
    """Kill ``k``: arm the point, publish sessions until it fires (or none are left), then kill
    the pool process that reached it (even ``k``) or its whole worker (odd); its log entry."""
    marker_path = hooks / f"fired-{k}.json"
    publish_next(per_kill)
    fired = reached(marker_path)
    while not fired and queue:
        publish_next(1)
        fired = reached(marker_path)
    if not fired:
        (hooks / "arm.json").unlink(missing_ok=True)
        return {"id": k, "stage": stage, "after": method, "fired": False, "confirmed": False}
    marker = json.loads(marker_path.read_text())
    whole_worker = k % 2 == 1
    if whole_worker:
        cluster.replace_after_kill()
    else:
        os.kill(marker["pid"], signal.SIGKILL)
    gone = wait_until(lambda: not pid_alive(marker["pid"]), timeout=10)
    run = store.runs.get_run(marker["run_id"])
    record = run.stages.get(marker["stage"]) if run else None
    confirmed = bool(gone and record is not None and record.attempts >= 1)
    cluster.ensure_alive()
    return {**marker, "after": method, "fired": True, "whole_worker": whole_worker,
            "stage_status_after_kill": record.status if record else None, "confirmed": confirmed}


def _by_stage(kill_log: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in kill_log:
        if k["confirmed"]:
            key = stage_category(k["stage"])
            out[key] = out.get(key, 0) + 1
    return out


def _settle(cluster: _Cluster, app, redis: PersistentRedis, store, quiet_s: float = QUIET_S) -> bool:
    """Until every session is formed and nothing is queued, playing beat's stale-run retry;
    False once the store has stood still for ``quiet_s`` short of that
    (``testkit.waiting.settle``)."""
    next_retry = 0.0

    def tick() -> None:
        nonlocal next_retry
        cluster.ensure_alive()
        if time.monotonic() >= next_retry:
            send(names.TASK_RETRY_STALE, {}, app=app)
            next_retry = time.monotonic() + 4.0

    return settle(lambda: queues_idle(redis.client(0)) and _all_formed(store), lambda: store_state(store),
                  quiet_s=quiet_s, tick=tick)


def _all_formed(store) -> bool:
    """No run is active, and every message of every session is in a claimed range."""
    if any(r.status in ("claimed", "running", "failed") for r in store.runs.list_runs(limit=100_000)):
        return False
    return all(s.get("claimed_through", 0) >= s.get("last_seq", 0) for s in store.admin.dump_all().get("sessions", []))
