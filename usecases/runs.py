"""Run inspection and repair (design §9): ``runs`` (and ``runs --wait``), one run with its
messages, ``replay-failed`` and ``reembed``.

Pure over the store and embedder ports; the door hands in how a replayed run is started (the
CLI and the API send its first stage, ``names.TASK_EXTRACT_FACTS``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipeline import cost, tracing
from pipeline.embeddings.port import Embedder
from pipeline.formation.finish import screening_totals
from pipeline.formation.outputs import StageOutputInvalid
from pipeline.store.port import Store
from pipeline.sweep import start_runs
from schemas.documents import STAGES, FormationRun, LLMUsage, StoredMessage, scope_key
from usecases.audit import Audited

REPLAYABLE = ("failed", "dead")
IN_FLIGHT = ("claimed", "running")
#: the sessions of this many newest runs are checked for formation still to come
RECENT_RUNS = 500


def call_totals(usage: LLMUsage) -> dict[str, int]:
    """Tokens in and out and calls of one stage record: its per-model rows (language model
    and embedding calls alike, as the run page lists them), or for a record stored before
    those rows were kept, its language model counts."""
    if not usage.by_model:
        return {"input": usage.input_tokens, "output": usage.output_tokens, "calls": usage.calls}
    rows = usage.by_model.values()
    return {"input": sum(int(r.get("input_tokens") or 0) for r in rows),
            "output": sum(int(r.get("output_tokens") or 0) for r in rows),
            "calls": sum(int(r.get("calls") or 0) for r in rows)}


def run_summary(run: FormationRun) -> dict[str, Any]:
    """One run as an operator reads it: status, range, stage timings, tokens, what was kept
    out of memory (secrets, contact data; design §11) and errors. A stage output that does
    not read is said (``unreadable``), and the rest of the run is shown."""
    stages = {}
    for name in STAGES:
        record = run.stages.get(name)
        if record is None:
            continue
        stages[name] = {"status": record.status, "ms": record.duration_ms, "attempts": record.attempts}
        if record.error:
            stages[name]["error"] = record.error
    tokens = {"input": 0, "output": 0, "calls": 0}
    for record in run.stages.values():  # every stage record, as the run page's table lists them
        for key, got in call_totals(record.usage).items():
            tokens[key] += got
    try:
        kept_out, unreadable = screening_totals(run), None
    except StageOutputInvalid as exc:
        kept_out, unreadable = {}, str(exc)
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
        # from the stage records, so a failed or running run shows what it cost so far
        "cost": cost.summary(record.usage.by_model for record in run.stages.values()),
        **kept_out,
        **({"unreadable": unreadable} if unreadable else {}),
        "error": run.error,
        # open it in a trace viewer (Jaeger: /trace/<id>); None when the run was not traced
        "trace_id": tracing.trace_id(run.trace_context),
    }


def list_run_summaries(
    store: Store, *, status: str | None = None, agent_id: str | None = None,
    session_id: str | None = None, limit: int = 50,
) -> list[dict[str, Any]]:
    runs = store.runs.list_runs(status=status, agent_id=agent_id, session_id=session_id, limit=limit)
    return [run_summary(run) for run in runs]


@dataclass(frozen=True)
class RunDetail:
    run: FormationRun
    summary: dict[str, Any]
    messages: list[StoredMessage]


def run_detail(store: Store, run_id: str) -> RunDetail | None:
    """One run as its page shows it: the record, its summary and the messages of its range;
    None when no such run is stored (erased, or never stored)."""
    run = store.runs.get_run(run_id)
    if run is None:
        return None
    return RunDetail(run, run_summary(run), store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to))


def formation_pending(
    store: Store, *, agent_id: str | None = None, session_id: str | None = None,
) -> list[str]:
    """What formation still has to do, one line each ([] when it is done for now): runs
    claimed or running; an ended session with messages no run has claimed yet (its
    session-end run is being claimed); an ended session, with no run holding it, whose own
    reflections are still buffered (its session-end consolidation comes next). The sessions
    checked are those of the newest ``RECENT_RUNS`` runs. A failed run is not waited for: beat
    retries it later, and ``runs`` lists it."""
    pending = [
        f"run {run.run_id} of session {run.session_id} is {run.status}"
        for status in IN_FLIGHT
        for run in store.runs.list_runs(status=status, agent_id=agent_id, session_id=session_id, limit=RECENT_RUNS)
    ]
    sessions = dict.fromkeys(
        run.session_id for run in store.runs.list_runs(agent_id=agent_id, session_id=session_id, limit=RECENT_RUNS))
    for sid in sessions:
        session = store.ingest.get_session(sid)
        if session is None or session.ended_at is None:
            continue
        if session.claimed_through < session.last_seq:
            pending.append(f"session {sid} ended with {session.last_seq - session.claimed_through} "
                           "unformed message(s): its run is being claimed")
        elif session.active_run_id is None and _leftovers(store, session.agent_id, sid, session.users):
            pending.append(f"session {sid} ended: its buffered reflections are being consolidated")
    return pending


def _leftovers(store: Store, agent_id: str, session_id: str, users: list[str]) -> bool:
    """Whether a scope the session writes to buffers a reflection the session formed."""
    keys = [scope_key("agent"), scope_key("session", session_id=session_id),
            *(scope_key("user", user_id=u) for u in users)]
    return any(r.source_session_id == session_id for key in keys for r in store.reflections.unabsorbed_reflections(agent_id, key))


@dataclass(frozen=True)
class Replayed:
    """The runs reopened and started, and ``{run_id, reason}`` for each left alone."""
    replayed: list[str]
    skipped: list[dict[str, str]]
    agent_id: str | None = None
    report: dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "report", {"replayed": self.replayed, "skipped": self.skipped})

    @property
    def audit(self) -> Audited:
        return Audited("replay_failed", self.agent_id, None,
                       {"replayed": len(self.replayed), "skipped": len(self.skipped)})


def replay_failed(
    store: Store, now: datetime, lease_s: float, start: Callable[[str], None], *,
    agent_id: str | None = None, run_ids: list[str] | None = None, limit: int = 1000,
) -> Replayed:
    """Reopen failed and dead runs with fresh attempts, then ``start`` each (send its first
    stage). ``skipped`` holds ``{run_id, reason}`` for every run left alone: not found, not
    failed or dead, another agent's, or its session held by another live run (replay it later)."""
    replayed: list[str] = []
    skipped: list[dict[str, str]] = []
    if run_ids:
        candidates = []
        for run_id in run_ids:
            run = store.runs.get_run(run_id)
            if run is None:
                skipped.append({"run_id": run_id, "reason": "no such run"})
            else:
                candidates.append(run)
    else:
        candidates = [r for status in REPLAYABLE for r in store.runs.list_runs(status=status, agent_id=agent_id, limit=limit)]
    for run in candidates:
        if run.status not in REPLAYABLE:
            skipped.append({"run_id": run.run_id, "reason": f"it is {run.status}; only failed and dead runs are replayed"})
            continue
        if agent_id and run.agent_id != agent_id:
            skipped.append({"run_id": run.run_id, "reason": f"it belongs to agent {run.agent_id}, not {agent_id}"})
            continue
        reopened = store.runs.reopen_run(run.run_id, now, lease_s, reset_attempts=True)
        if reopened is None:
            skipped.append({"run_id": run.run_id, "reason": _why_not_reopened(store, run.run_id, now)})
            continue
        start_runs(store.runs, [reopened.run_id], start, now)  # released again if it cannot start
        replayed.append(reopened.run_id)
    return Replayed(replayed, skipped, agent_id)


def _why_not_reopened(store: Store, run_id: str, now: datetime) -> str:
    run = store.runs.get_run(run_id)
    if run is None:
        return "it was deleted meanwhile (forget-user?)"
    if run.status not in REPLAYABLE:
        return f"it became {run.status} meanwhile (another replay or the stale-run sweep took it)"
    session = store.ingest.get_session(run.session_id)
    holder = session.active_run_id if session else None
    if holder and holder != run_id:
        return (f"session {run.session_id} is held by run {holder}; replay this one once that run "
                "is done or its lease expires")
    return "the store refused to reopen it (a live lease); try again later"


def models_to_replace(store: Store, model: str, agent_id: str | None = None) -> dict[str, dict[str, Any]]:
    """Per embedding model other than ``model`` (``"<none>"`` for facts without a vector): how
    many live facts carry it and when the newest of them was formed, i.e. what the workers
    have been writing."""
    found: dict[str, dict[str, Any]] = {}
    for facts in store.facts.iter_facts_for_reembed(agent_id, model, 1000):
        for fact in facts:
            entry = found.setdefault(fact.embedding_model or "<none>", {"facts": 0, "newest_formed_at": None})
            entry["facts"] += 1
            formed = fact.formed_at.isoformat()
            entry["newest_formed_at"] = max(entry["newest_formed_at"] or formed, formed)
    return found


def mismatch_warning(model: str, found: dict[str, dict[str, Any]], setting_hint: str) -> str | None:
    """What an operator must check before re-embedding: facts embedded by the workers with
    another model mean either the model was changed on purpose (re-embed) or this shell's
    settings differ from the workers' (re-embedding would then hide the facts from search)."""
    other = {name: entry for name, entry in found.items() if name != "<none>"}
    if not other:
        return None
    seen = ", ".join(f"{name} ({e['facts']} facts, newest formed {e['newest_formed_at']})" for name, e in other.items())
    return (
        f"warning: the facts were embedded with {seen}, but this reembed uses {model} ({setting_hint}). "
        "Search only finds facts of the model it embeds queries with: if the workers still use "
        "the old model, stop (Ctrl-C) and give this command the workers' MEMORY_EMBEDDING_* settings."
    )


def reembed(
    store: Store, embedder: Embedder, *, agent_id: str | None = None, batch: int = 64,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Re-embed every live fact whose embedding is not of ``embedder.model``; returns how many."""
    done = 0
    for facts in store.facts.iter_facts_for_reembed(agent_id, embedder.model, batch):
        if not facts:
            continue
        vectors = embedder.embed([f.content for f in facts])
        for fact, vector in zip(facts, vectors.vectors):
            store.facts.set_fact_embedding(fact.fact_id, vector, vectors.model)
        done += len(facts)
        if progress:
            progress(len(facts))
    return done
