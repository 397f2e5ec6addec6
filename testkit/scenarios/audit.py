"""What the reliability report counts, read from the store after a scenario has settled.

- ``formations_completed``: runs ``done``;
- ``stuck_runs``: runs still ``claimed``/``running``/``failed`` (``dead`` ones are counted
  apart: they keep a recorded reason and only an operator's replay picks them up);
- ``messages_unformed``: stored messages inside no ``done`` run's range;
- ``duplicate_facts``: extra live facts with the same (agent, scope key, normalized-text hash), or
  more facts from a run than it planned to insert (its insert effects and the facts its effect
  notes say it added instead of an UPDATE), plus the same run's UPDATE applied twice
  to one fact;
- ``duplicate_reflections``: extra reflections of one run with the same text in one scope key;
- ``lost_reflections``: reflections a done run's extract_reflections stage produced that are
  not stored, plus reflections marked absorbed into a blob version that was never saved;
- ``lost_facts``: facts a done run decided to insert that no stored fact holds;
- ``leaks``: stored memory whose agent, scope or user is not what its source run allowed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pipeline.formation.outputs import Insert, read_stored
from pipeline.text import normalize, text_hash
from schemas.documents import ConsolidatedBlob, Fact, FormationRun, Reflection, SessionState, Stage, StoredMessage


def _load(dump: dict[str, list[dict]]) -> dict[str, list[Any]]:
    return {
        "facts": [Fact.model_validate(d) for d in dump.get("facts", [])],
        "reflections": [Reflection.model_validate(d) for d in dump.get("reflections", [])],
        "runs": [FormationRun.model_validate(d) for d in dump.get("runs", [])],
        "sessions": [SessionState.model_validate(d) for d in dump.get("sessions", [])],
        "messages": [StoredMessage.model_validate(d) for d in dump.get("messages", [])],
        "consolidated": [ConsolidatedBlob.model_validate(d) for d in dump.get("consolidated", [])],
    }


def audit(store) -> dict[str, Any]:
    """Every figure of the module docstring, and samples of what each one counted."""
    data = _load(store.admin.dump_all())
    facts, reflections, runs = data["facts"], data["reflections"], data["runs"]
    status = Counter(r.status for r in runs)
    done_runs = [r for r in runs if r.status == "done"]

    formed: dict[str, set[int]] = {}
    for run in done_runs:
        formed.setdefault(run.session_id, set()).update(range(run.seq_from, run.seq_to + 1))
    unformed = [m for m in data["messages"] if m.seq is None or m.seq not in formed.get(m.session_id, set())]

    dup_facts, double_updates, dup_refl = _duplicates(facts, reflections, done_runs)
    lost_refl, lost_facts = _lost(data, done_runs)

    leaks = _leaks(data)
    return {
        "runs": len(runs),
        "formations_completed": status.get("done", 0),
        "stuck_runs": sum(status.get(s, 0) for s in ("claimed", "running", "failed")),
        "dead_runs": status.get("dead", 0),
        "dead_reasons": sorted({(r.error or "")[:160] for r in runs if r.status == "dead"})[:5],
        "messages": len(data["messages"]),
        "messages_unformed": len(unformed),
        "duplicate_facts": dup_facts + double_updates,
        "duplicate_reflections": dup_refl,
        "lost_reflections": len(lost_refl),
        "lost_facts": len(lost_facts),
        "leaks": len(leaks),
        "facts": len(facts),
        "reflections": len(reflections),
        "blobs": len(data["consolidated"]),
        "samples": {"unformed": [f"{m.session_id}#{m.seq}" for m in unformed[:5]], "lost": (lost_refl + lost_facts)[:5],
                    "leaks": leaks[:5]},
    }


def _duplicates(facts: list, reflections: list, done_runs: list) -> tuple[int, int, int]:
    """Duplicate live facts (same text, same hash, or an insert applied twice), facts updated
    twice by one run, duplicate reflections of one run."""
    # a retired fact may share its text with a live one (a value that came back): only live
    # facts count towards exact duplicates
    live = [f for f in facts if f.retired_at is None]
    by_key = Counter((f.agent_id, f.scope_key, text_hash(f.content)) for f in live)
    dup_facts = sum(n - 1 for n in by_key.values() if n > 1)
    by_hash_column = Counter((f.agent_id, f.scope_key, f.hash) for f in live)
    dup_facts = max(dup_facts, sum(n - 1 for n in by_hash_column.values() if n > 1))
    double_updates = 0
    for fact in facts:
        runs_in_history = Counter(h.run_id for h in fact.history if h.run_id)
        double_updates += sum(n - 1 for n in runs_in_history.values() if n > 1)
    # the same insert effect applied twice shows as more facts from a run than it planned
    # (even when a later run has since merged the copies into different texts)
    planned: dict[str, int] = {}
    for run in done_runs:
        decided = read_stored(run, Stage.DECIDE_FACTS)
        planned[run.run_id] = sum(1 for e in (decided.effects if decided else []) if isinstance(e, Insert))
        # an UPDATE that could not apply as decided adds its fact instead (effect notes)
        planned[run.run_id] += sum(1 for n in run.effect_notes if n.get("added"))
    from_run = Counter(f.source_run_id for f in facts if f.source_run_id in planned)
    applied_twice = sum(max(0, n - planned[run_id]) for run_id, n in from_run.items())
    dup_facts = max(dup_facts, applied_twice)
    refl_key = Counter((r.agent_id, r.scope_key, r.source_run_id, normalize(r.content)) for r in reflections)
    dup_refl = sum(n - 1 for n in refl_key.values() if n > 1)
    return dup_facts, double_updates, dup_refl


def _lost(data: dict[str, list[Any]], done_runs: list) -> tuple[list[str], list[str]]:
    """Reflections and facts a done run stored as its output but the store does not hold, and
    absorbed reflections whose blob is missing or older than what absorbed them."""
    facts, reflections = data["facts"], data["reflections"]
    stored_refl = {r.reflection_id for r in reflections}
    lost_refl: list[str] = []
    lost_facts: list[str] = []
    fact_ids = {f.fact_id for f in facts}
    fact_keys = {(f.agent_id, f.scope_key, f.hash) for f in facts}
    for run in done_runs:
        reflected = read_stored(run, Stage.EXTRACT_REFLECTIONS)
        for item in (reflected.reflections if reflected else []):
            if item.reflection_id not in stored_refl:
                lost_refl.append(f"{run.run_id}:{item.reflection_id}")
        decided = read_stored(run, Stage.DECIDE_FACTS)
        for effect in (decided.effects if decided else []):
            if isinstance(effect, Insert) and effect.fact_id not in fact_ids \
                    and (run.agent_id, effect.scope_key, effect.hash) not in fact_keys:
                lost_facts.append(f"{run.run_id}:{effect.fact_id}")
    blobs = {(b.agent_id, b.scope_key): b for b in data["consolidated"]}
    for r in reflections:
        if r.absorbed:
            blob = blobs.get((r.agent_id, r.scope_key))
            if blob is None or blob.version < (r.consolidated_into or 0):
                lost_refl.append(f"absorbed-into-missing-blob:{r.reflection_id}")
    return lost_refl, lost_facts


def _leaks(data: dict[str, list[Any]]) -> list[str]:
    """Memory stored under an agent, scope or user its source session does not allow."""
    sessions = {s.session_id: s for s in data["sessions"]}
    runs = {r.run_id: r for r in data["runs"]}
    out: list[str] = []

    def check(kind: str, item, agent_id: str, scope: str, user_id: str | None, session_id: str | None,
              source_session: str | None, source_run: str | None) -> None:
        session = sessions.get(source_session or "")
        run = runs.get(source_run or "")
        where = f"{kind} {getattr(item, 'fact_id', None) or getattr(item, 'reflection_id', '')}"
        if session is None:
            return
        if agent_id != session.agent_id:
            out.append(f"{where}: agent {agent_id} but its session belongs to {session.agent_id}")
        if scope == "user":
            # who was in the session when the run claimed its range (later joiners do not count)
            humans = set(run.user_ids) if run is not None else set(session.users)
            if len(humans) > 1 or (run is not None and run.group_chat):
                out.append(f"{where}: user-scoped memory formed in a group chat")
            if user_id not in humans:
                out.append(f"{where}: user {user_id} was not in its session")
        if scope == "session" and session_id != source_session:
            out.append(f"{where}: session scope {session_id} but formed in {source_session}")
        if run is not None and run.scopes_enabled and scope not in run.scopes_enabled and \
                not any(s.startswith(scope) for s in run.scopes_enabled):
            out.append(f"{where}: scope {scope} not enabled for its run ({run.scopes_enabled})")

    for f in data["facts"]:
        check("fact", f, f.agent_id, f.scope, f.user_id, None, f.source_session_id, f.source_run_id)
    for r in data["reflections"]:
        check("reflection", r, r.agent_id, r.scope, r.user_id, r.session_id, r.source_session_id, r.source_run_id)
    return out
