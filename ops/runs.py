"""Run inspection and repair (SPEC §9): ``runs``, ``replay-failed`` and ``reembed``.

Pure over the store and embedder ports; the command module sends the first stage of each
replayed run (``names.TASK_EXTRACT_FACTS``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pipeline.embeddings.port import Embedder
from pipeline.store.port import Store
from pipeline.sweep import start_runs
from schemas.documents import STAGES, FormationRun

REPLAYABLE = ("failed", "dead")


def run_summary(run: FormationRun) -> dict[str, Any]:
    """One run as an operator reads it: status, range, stage timings, tokens and errors."""
    stages = {}
    tokens = {"input": 0, "output": 0, "calls": 0}
    for name in STAGES:
        record = run.stages.get(name)
        if record is None:
            continue
        stages[name] = {"status": record.status, "ms": record.duration_ms, "attempts": record.attempts}
        if record.error:
            stages[name]["error"] = record.error
        tokens["input"] += record.usage.input_tokens
        tokens["output"] += record.usage.output_tokens
        tokens["calls"] += record.usage.calls
    return {
        "run_id": run.run_id,
        "agent_id": run.agent_id,
        "session_id": run.session_id,
        "reason": run.reason,
        "status": run.status,
        "attempts": run.attempts,
        "seq": [run.seq_from, run.seq_to],
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "total_ms": sum(s["ms"] or 0 for s in stages.values()),
        "stages": stages,
        "tokens": tokens,
        "error": run.error,
    }


def format_run(summary: dict[str, Any]) -> str:
    """One line per run, then one indented line per stage."""
    tokens = summary["tokens"]
    head = (
        f"{summary['run_id']}  {summary['status']:<8} {summary['reason']:<11} "
        f"agent={summary['agent_id']} session={summary['session_id']} "
        f"seq={summary['seq'][0]}-{summary['seq'][1]} attempts={summary['attempts']} "
        f"{summary['total_ms']:.0f} ms  tokens in/out {tokens['input']}/{tokens['output']} ({tokens['calls']} calls)"
    )
    lines = [head]
    for name, stage in summary["stages"].items():
        ms = "-" if stage["ms"] is None else f"{stage['ms']:.1f} ms"
        error = f"  error: {stage['error']}" if stage.get("error") else ""
        lines.append(f"    {name:<20} {stage['status']:<8} {ms:>10}{error}")
    if summary["error"]:
        lines.append(f"    error: {summary['error']}")
    return "\n".join(lines)


def list_run_summaries(
    store: Store, *, status: str | None = None, agent_id: str | None = None,
    session_id: str | None = None, limit: int = 50,
) -> list[dict[str, Any]]:
    runs = store.list_runs(status=status, agent_id=agent_id, session_id=session_id, limit=limit)
    return [run_summary(run) for run in runs]


def replay_failed(
    store: Store, now: datetime, lease_s: float, start: Callable[[str], None], *,
    agent_id: str | None = None, run_ids: list[str] | None = None, limit: int = 1000,
) -> dict[str, list[str]]:
    """Reopen failed and dead runs with fresh attempts, then ``start`` each (send its first
    stage). Runs whose session is held by another live run are left for a later replay."""
    if run_ids:
        candidates = [r for r in (store.get_run(i) for i in run_ids) if r is not None]
    else:
        candidates = [r for status in REPLAYABLE for r in store.list_runs(status=status, agent_id=agent_id, limit=limit)]
    replayed, skipped = [], []
    for run in candidates:
        if run.status not in REPLAYABLE or (agent_id and run.agent_id != agent_id):
            skipped.append(run.run_id)
            continue
        reopened = store.reopen_run(run.run_id, now, lease_s, reset_attempts=True)
        if reopened is None:
            skipped.append(run.run_id)
            continue
        start_runs(store, [reopened.run_id], start, now)  # released again if it cannot start
        replayed.append(reopened.run_id)
    return {"replayed": replayed, "skipped": skipped}


def reembed(
    store: Store, embedder: Embedder, *, agent_id: str | None = None, batch: int = 64,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Re-embed every live fact whose embedding is not of ``embedder.model``; returns how many."""
    done = 0
    for facts in store.iter_facts_for_reembed(agent_id, embedder.model, batch):
        if not facts:
            continue
        vectors = embedder.embed([f.content for f in facts])
        for fact, vector in zip(facts, vectors.vectors):
            store.set_fact_embedding(fact.fact_id, vector, vectors.model)
        done += len(facts)
        if progress:
            progress(len(facts))
    return done
