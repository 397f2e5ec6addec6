"""The whole pipeline in one process, driven step by step: the real SQLite store (one file),
the real ingest, stages, sweeps and erasure, the offline LLM, the hashing embedder and a
frozen clock; two ``MemoryService`` instances, each with its own store connection, stand in
for two processes of an agent runtime.

The broker is a list of pending tasks. Publishing ingests at once (as an ingest worker would)
and queues what ``workers.ingest.hand_on`` sends; running a task calls the stage function the
matching task of ``workers/formation.py`` or ``workers/consolidation.py`` calls and queues
what that task hands on. Which pending task runs next is the caller's choice, so stages of
different runs interleave in any order the chains allow, and the consolidate fan-out's scopes
run in any order. Errors follow ``workers.formation.guarded``: a transient error is retried
(a bounded number of times, then the run fails and the stale-run retry reopens it), a
permanent one kills the run, anything else is a bug and is raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from usecases.erase import forget_user
from usecases.verify import traces
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.errors import PermanentError, TransientError
from pipeline.formation import consolidate_stages as cs
from pipeline.formation import stages
from pipeline.formation.finish import finish
from pipeline.formation.runner import RunNotFound
from pipeline.ingest import IngestResult, ingest_raw_event, ingest_raw_events
from pipeline.ingest_results import ConsolidateSession, DeliverAgain, StartRun
from pipeline.llm.offline import OfflineLLM
from pipeline.publisher import Publisher
from pipeline.search.local import LocalFactSearch
from pipeline.service import MemoryService
from pipeline.store.sqlite import SQLiteStore
from pipeline.sweep import retry_stale_runs, sweep_cold_sessions
from schemas.settings import Settings

AGENT = "agent-props"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)

_NEXT = {
    "extract_facts": ("embed_facts", stages.extract_facts),
    "embed_facts": ("decide_facts", stages.embed_facts),
    "decide_facts": ("extract_reflections", stages.decide_facts),
    "extract_reflections": ("consolidate", stages.extract_reflections),
}


@dataclass
class Task:
    name: str
    args: dict[str, Any]
    retries: int = 0


@dataclass
class Deps:
    """What a stage needs (``pipeline.formation.runner.Deps``): one formation worker."""

    settings: Settings
    store: SQLiteStore
    llm: OfflineLLM
    embedder: HashingEmbedder
    search: LocalFactSearch
    clock: FrozenClock


class SyncPublisher(Publisher):
    """The broker plus an ingest worker: events are ingested when published."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack

    def publish(self, events: Sequence[dict[str, Any]]) -> int:
        stack = self.stack
        batch = ingest_raw_events(list(events), stack.deps.store, stack.deps.settings, stack.clock)
        assert batch.error is None and not batch.failures, (batch.error, batch.failures)
        for raw, result in zip(events, batch.results):
            assert result.status != "rejected", result.errors
            stack.hand_on(result, raw)
        return len(events)


@dataclass
class Stack:
    path: Path
    settings: Settings
    clock: FrozenClock = field(default_factory=lambda: FrozenClock(T0))
    queue: list[Task] = field(default_factory=list)

    def __post_init__(self) -> None:
        db = str(self.path)
        store = SQLiteStore(db)
        store.create_indexes()
        embedder = HashingEmbedder(64)
        self.deps = Deps(self.settings, store, OfflineLLM(self.settings), embedder, LocalFactSearch(store), self.clock)
        self.services = []
        for _ in range(2):
            own = SQLiteStore(db)
            self.services.append(MemoryService(
                AGENT, settings=self.settings, store=own, search=LocalFactSearch(own), embedder=embedder,
                publisher=SyncPublisher(self), clock=self.clock, run_starter=self.start_run,
            ))

    def close(self) -> None:
        for service in self.services:
            service.store.close()
        self.deps.store.close()

    # ---- the broker ---------------------------------------------------------------------
    def send(self, name: str, **args: Any) -> None:
        self.queue.append(Task(name, args))

    def start_run(self, run_id: str) -> None:
        self.send("extract_facts", run_id=run_id)

    def hand_on(self, result: IngestResult, raw: Any) -> None:
        """What ``workers.ingest.hand_on`` sends for one ingested event: what ingest decided."""
        step = result.then
        if isinstance(step, StartRun):
            self.start_run(step.run_id)
        elif isinstance(step, ConsolidateSession):
            self.send("consolidate_session", agent_id=step.agent_id, session_id=step.session_id)
        elif isinstance(step, DeliverAgain):
            self.send("ingest_event", event=raw, deferrals=step.deferrals)

    # ---- a worker takes one task --------------------------------------------------------
    def run_task(self, index: int) -> None:
        task = self.queue.pop(index)
        try:
            self._execute(task)
        except RunNotFound:  # the run was erased meanwhile: the chain stops (guarded logs it)
            pass
        except TransientError as exc:
            self._transient(task, exc)
        except PermanentError as exc:
            if "run_id" in task.args:
                self.deps.store.runs.fail_run(task.args["run_id"], f"{task.name}: {exc}", self.clock.now(), dead=True)

    def _transient(self, task: Task, exc: TransientError) -> None:
        if task.retries < self.settings.task_max_retries:
            self.queue.append(Task(task.name, task.args, task.retries + 1))
        elif task.name == "consolidate_scope" and isinstance(exc, cs.ScopeBusy):
            cs.skip_scope(task.args["run_id"], task.args["index"], str(exc), self.deps)
            if cs.scopes_done(self.deps, task.args["run_id"]):
                self.send("finish", run_id=task.args["run_id"])
        elif "run_id" in task.args:
            self.deps.store.runs.fail_run(task.args["run_id"], f"{task.name}: {exc}", self.clock.now(), dead=False)

    def _execute(self, task: Task) -> None:
        deps, name, args = self.deps, task.name, task.args
        if name == "ingest_event":
            result = ingest_raw_event(args["event"], deps.store, deps.settings, self.clock, args["deferrals"])
            self.hand_on(result, args["event"])
        elif name in _NEXT:
            following, stage = _NEXT[name]
            if stage(args["run_id"], deps) is not None:
                self.send(following, run_id=args["run_id"])
        elif name == "consolidate":  # workers.formation.consolidate: the fan-out
            result = cs.consolidate(args["run_id"], deps)
            if result is None:
                return
            due = result.output["due"]
            pending = list(range(len(due))) if not result.reused else cs.pending_scopes(
                deps.store.runs.get_run(args["run_id"]))
            for index in pending:
                self.send("consolidate_scope", run_id=args["run_id"], index=index)
            if not pending:
                self.send("finish", run_id=args["run_id"])
        elif name == "consolidate_scope":
            if cs.consolidate_scope(args["run_id"], args["index"], deps) is not None \
                    and cs.scopes_done(deps, args["run_id"]):
                self.send("finish", run_id=args["run_id"])
        elif name == "finish":
            outcome, step = finish(args["run_id"], deps)
            if step.run_id:
                self.start_run(step.run_id)
            if step.consolidate_session:
                agent_id, session_id = step.consolidate_session
                self.send("consolidate_session", agent_id=agent_id, session_id=session_id)
        elif name == "consolidate_session":
            cs.consolidate_session(args["agent_id"], args["session_id"], deps)
        else:
            raise AssertionError(f"unknown task {name}")

    # ---- beat and operators -------------------------------------------------------------
    def beat(self) -> None:
        """Beat's two jobs: the cold-session sweep and the retry of stale runs."""
        now = self.clock.now()
        for run_id in sweep_cold_sessions(self.deps.store, self.settings, now).run_ids:
            self.start_run(run_id)
        for run_id in retry_stale_runs(self.deps.store.runs, self.settings, now).run_ids:
            self.start_run(run_id)

    def forget(self, user_id: str) -> list[str]:
        """``memoryctl forget-user --user U --agent A --verify``: its own store connection,
        the erasure, then the audit; returns the traces ``--verify`` would report."""
        store = SQLiteStore(str(self.path))
        try:
            forget_user(store, user_id, AGENT, settings=self.settings, llm=self.deps.llm, clock=self.clock)
            return traces(store.admin.dump_all(), user_id, AGENT)
        finally:
            store.close()
