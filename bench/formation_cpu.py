"""Formation CPU in one process: ``python -m bench.formation_cpu [--formations 200]``.

The CPU the project's own code spends on one formation, without a broker or a worker: the
chain of ``bench.formation`` (the same scripted answers, at no latency; one fact updating a
seeded one, four session reflections and their consolidation) on the SQLite store with the
hashing embedder and the local search, every stage called in turn in one thread. What the
worker CPU of ``bench.formation`` adds to it is Celery, kombu and the Redis round trips of
seven tasks.

``cpu_ms_per_formation``: the thread's CPU time per formation, the lowest and the median over
batches of 20 formations (the lowest is the one least disturbed by other work on a shared
machine); ``sqlite_transactions_per_formation`` and ``run_document_parses_per_formation``
(whole runs read and parsed) are counted on the last batch. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.formation import AGENT, seed
from bench.formation_app import bench_llm
from pipeline import trigger
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.formation import consolidate_stages, finish, stages
from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import db as sqlite_db
from pipeline.store.sqlite import SQLiteStore
from pipeline.store.sqlite.runs import SQLiteRuns
from schemas.documents import AgentSettings, FormationRun, StoredMessage
from schemas.settings import Settings
from testkit.formation import Env as Deps  # every port a stage needs, as the stage tests build them

BATCH = 20
DIM = 384


def claimed_run(deps: Deps, user: str) -> str:
    """One session of ``user`` (the bench's four messages), claimed as a session end claims it."""
    session_id = f"s-{user}"
    rows = [("user", f"My email address is {user}@example.org now."), ("assistant", "Noted."),
            ("user", "Can you plan the next steps?"), ("assistant", "Here they are.")]
    for n, (role, text) in enumerate(rows, 1):
        now = deps.clock.advance(seconds=1)
        deps.store.ingest.ingest_message(StoredMessage(
            agent_id=AGENT, session_id=session_id, message_id=f"{session_id}-m{n}", event_id=f"{session_id}-e{n}",
            role=role, sender_id=user if role == "user" else None, content=text, created_at=now, ingested_at=now,
            weighted_tokens=trigger.estimate_tokens(text), session_users=[user],
        ), now)
    run = deps.store.runs.try_claim(session_id, trigger.session_end_rule(), FormationRun(
        run_id=f"run-{session_id}", agent_id=AGENT, session_id=session_id, seq_from=0, seq_to=0, reason="manual",
        created_at=deps.clock.now(),
    ), deps.clock.now(), deps.settings.claim_lease_s)
    if run is None:
        raise RuntimeError(f"session {session_id} could not be claimed")
    return run.run_id


def form(deps: Deps, run_id: str) -> None:
    """Every stage of one run, as the tasks would call them one after another."""
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts, stages.extract_reflections):
        if stage(run_id, deps) is None:
            raise RuntimeError(f"run {run_id}: {stage.__name__} found the run no longer active")
    for index in range(len(consolidate_stages.consolidate(run_id, deps).output["due"])):
        consolidate_stages.consolidate_scope(run_id, index, deps)
    finish.finish(run_id, deps)


class Counts:
    """Write transactions and whole-run parses of the SQLite store, counted while ``on``,
    within ``with Counts() as counts``."""

    def __init__(self) -> None:
        self.on = False
        self.transactions = self.parses = 0
        self._saved = (sqlite_db.Database.write, SQLiteRuns._run)

    def __enter__(self) -> "Counts":
        write, parse = self._saved
        counts = self

        def counted_write(db):
            counts.transactions += counts.on
            return write(db)

        def counted_parse(store, conn, run_id):
            counts.parses += counts.on
            return parse(store, conn, run_id)

        sqlite_db.Database.write, SQLiteRuns._run = counted_write, counted_parse
        return self

    def __exit__(self, *_: object) -> None:
        sqlite_db.Database.write, SQLiteRuns._run = self._saved


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formations", type=int, default=200, help="formations measured (batches of 20)")
    parser.add_argument("--warmup", type=int, default=10, help="formations run first, unmeasured")
    args = parser.parse_args(argv)
    if args.formations < 1 or args.warmup < 0:
        parser.error("--formations must be at least 1 and --warmup at least 0")
    with Counts() as counts, tempfile.TemporaryDirectory(prefix="bench-formation-cpu-") as tmp:
        path = Path(tmp) / "memory.db"
        settings = Settings(_env_file=None, store_url=f"sqlite:///{path}", llm_provider="offline",
                            embedding_provider="hashing")
        store = SQLiteStore(str(path))
        store.create_indexes()
        clock = FrozenClock(datetime.now(timezone.utc))
        deps = Deps(settings, store, bench_llm(0.0), HashingEmbedder(DIM), LocalFactSearch(store), clock)
        store.ingest.put_agent_settings(AgentSettings(agent_id=AGENT))
        users = [f"u{i}" for i in range(args.warmup + args.formations)]
        seed(store, users, DIM)
        runs = [claimed_run(deps, user) for user in users]
        for run_id in runs[:args.warmup]:
            form(deps, run_id)
        batches = []
        measured = runs[args.warmup:]
        for start in range(0, len(measured), BATCH):
            batch = measured[start:start + BATCH]
            counts.on = start + BATCH >= len(measured)
            began = time.thread_time()
            for run_id in batch:
                form(deps, run_id)
            batches.append((time.thread_time() - began) * 1000 / len(batch))
        last = len(measured) - (len(measured) - 1) // BATCH * BATCH
        done = len(store.runs.list_runs(status="done", limit=len(runs)))
        store.close()
    if done != len(runs):
        raise RuntimeError(f"{len(runs) - done} of {len(runs)} runs did not finish")
    result = {
        "formations": len(measured),
        "cpu_ms_per_formation_min": round(min(batches), 2),
        "cpu_ms_per_formation_median": round(sorted(batches)[len(batches) // 2], 2),
        "sqlite_transactions_per_formation": round(counts.transactions / last, 1),
        "run_document_parses_per_formation": round(counts.parses / last, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
