"""What the inspector's pages show, read from the store and the service (design §12): plain
values for the templates, no HTML here. Every read goes through the store port, the
``MemoryService`` and the ops functions that the CLI and the HTTP API use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from api.context_view import structured
from pipeline import validity
from pipeline.prompts.consolidation import parse_blob
from pipeline.owner.categories import DEFAULT_CATEGORIES
from pipeline.search.filters import named_categories
from schemas.documents import Fact, FormationRun, scope_key

#: how many of the newest runs the agents page reads to find agents, people and sessions (a run
#: document carries its stage outputs, some 30 KB each in the demo: 200 of them make the page in 30-70 ms)
RECENT_RUNS = 200
PAGE_SIZE = 50
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)  # recent_facts from the start: no lower bound


@dataclass
class AgentRow:
    agent_id: str
    name: str | None
    user_memory: bool
    agent_memory: bool
    agent_facts: int
    runs: Counter = field(default_factory=Counter)
    users: dict[str, int] = field(default_factory=dict)       # user -> live user-scope facts
    sessions: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)            # "*" (everything), "agent", "session:<id>"
    instructions: list[str] = field(default_factory=list)      # "extraction/all v3", one per current text


def _owner_controls(row: AgentRow, settings) -> None:
    """What the owner set (design §13): the paused scope keys and the current instructions."""
    row.paused = [p.scope_key for p in settings.paused]
    current = {(i.stage, i.scope): i for i in sorted(settings.instructions, key=lambda i: i.version)}
    row.instructions = [f"{stage}/{scope} v{i.version}" for (stage, scope), i in sorted(current.items()) if i.text]


def agents(store) -> list[AgentRow]:
    """Agents seen in the newest ``RECENT_RUNS`` runs, with toggles, fact counts, run counts
    by status, and every person and session that has memory of the agent (read from the
    memory itself: an erasure deletes the runs that name the person, the others' memory of a
    group session stays) or a run among those (an agent with no run yet is opened by its id)."""
    runs = store.runs.list_runs(limit=RECENT_RUNS)
    rows: dict[str, AgentRow] = {}
    for run in runs:
        row = rows.get(run.agent_id)
        if row is None:
            s = store.ingest.get_agent_settings(run.agent_id)
            row = rows[run.agent_id] = AgentRow(run.agent_id, s.name, s.user_memory_enabled, s.agent_memory_enabled,
                                                store.facts.count_facts(run.agent_id, "agent"))
            _owner_controls(row, s)
        row.runs[run.status] += 1
        for user in run.user_ids:
            row.users.setdefault(user, 0)
        if run.session_id not in row.sessions:
            row.sessions.append(run.session_id)
    for row in rows.values():
        for key in store.facts.memory_scope_keys(row.agent_id):
            scope, _, owner = key.partition(":")
            if scope == "user":
                row.users.setdefault(owner, 0)
            elif scope == "session" and owner not in row.sessions:
                row.sessions.append(owner)
        for user in row.users:
            row.users[user] = store.facts.count_facts(row.agent_id, scope_key("user", user_id=user))
    return sorted(rows.values(), key=lambda r: r.agent_id)


def _fact_row(version: validity.FactVersion) -> dict[str, Any]:
    f = version.fact
    return {"id": f.fact_id, "scope": f.scope, "content": version.content, "version": version.version,
            "valid_from": version.valid_from, "valid_to": version.valid_to, "run_id": f.source_run_id,
            "user_id": f.user_id}


def memory(store, service, agent_id: str, *, user_id: str | None, session_id: str | None,
           as_of: datetime | None, now: datetime) -> dict[str, Any]:
    """A person's or a session's memory as the agent sees it: the three blobs (agent, user,
    session) by section, the reflections still buffered, the facts live now and those valid
    at ``as_of``, and the exact context the agent is given (built for ``as_of`` or now, so
    this view never writes the context cache)."""
    keys = [("agent", scope_key("agent"))]
    if user_id:
        keys.append(("user", scope_key("user", user_id=user_id)))
    if session_id:
        keys.append(("session", scope_key("session", session_id=session_id)))
    scopes = []
    for scope, key in keys:
        blob = store.blobs.get_blob(agent_id, key)
        if as_of is None:
            text, reflections = (blob.consolidated_content if blob else ""), store.reflections.unabsorbed_reflections(agent_id, key)
        else:  # the blob only if it was consolidated by then, the reflections buffered then
            text, reflections = validity.memory_as_of(blob, store.reflections.list_reflections(agent_id, key), as_of)
        scopes.append({"scope": scope, "key": key, "blob": blob if text else None, "sections": sections(text),
                       "reflections": sorted(reflections, key=lambda r: r.formed_at, reverse=True)[:20]})
    # an expired fact is out at once, stamped by beat or not (design §13 "Expiry")
    live = [validity.versions(f)[-1] for _, key in keys for f in validity.newest_unexpired(
        lambda n, key=key: store.facts.list_facts(agent_id, key, limit=n), now, PAGE_SIZE)]
    then = None
    if as_of is not None:  # the facts changed since as_of, and a page more: not every fact ever
        shown = [key for _, key in keys]
        then = [_fact_row(v) for v in validity.newest_valid_at(
            lambda n: store.facts.recent_facts(agent_id, shown, EPOCH, n, include_retired=True), as_of, PAGE_SIZE)]
    context = None
    if session_id or user_id:
        block = service.memory_context(session_id=session_id or f"inspect:{user_id}", user_id=user_id,
                                       as_of=as_of or now)
        context = structured(block, agent_id=agent_id, session_id=session_id or "", user_id=user_id)
    # one table across the scopes: newest valid first, as its "Valid from" column reads
    live_rows = sorted((_fact_row(v) for v in live), key=lambda r: r["valid_from"], reverse=True)
    if then is not None:
        then.sort(key=lambda r: r["valid_from"], reverse=True)
    return {"scopes": scopes, "live": live_rows, "then": then, "context": context}


def sections(text: str) -> list[tuple[str, list[str]]]:
    """A consolidated blob's sections and bullets, read by the blob format's own parser."""
    return [(section.name, list(section.bullets)) for section in parse_blob(text or "")[1]]


def fact_page(store, agent_id: str, key: str | None, page: int, now: datetime) -> dict[str, Any]:
    """One page of an agent's live facts (of one scope key, or all), newest first; a fact
    expired by ``now`` and not yet stamped by beat is left out (the page is that much shorter)."""
    rows = store.facts.list_facts(agent_id, key, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    return {"facts": validity.unexpired(rows[:PAGE_SIZE], now), "page": page, "more": len(rows) > PAGE_SIZE}


def fact_timeline(store, fact: Fact, now: datetime) -> dict[str, Any]:
    """Every version of a fact, oldest first, with validity, the run that wrote it and the
    source messages of that run's range (an UPDATE adds its message, often of a later
    session, to the fact's sources); whether it has expired by ``now``."""
    versions = validity.versions(fact)
    writers = _writers(fact)
    start = min(v.valid_from for v in versions)
    end = max([v.valid_to or v.recorded_at for v in versions] + [fact.changed_at])
    span = max((end - start).total_seconds(), 1.0)
    wanted = set(fact.source_message_ids)
    placed: set[str] = set()
    rows = []
    for v, run_id in zip(versions, writers):
        left = (v.valid_from - start).total_seconds() / span * 100
        right = 100.0 if v.valid_to is None else (v.valid_to - start).total_seconds() / span * 100
        run = store.runs.get_run(run_id) if run_id and not run_id.startswith("edit:") else None
        sources = []
        if run is not None:
            for m in store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to):
                if m.message_id in wanted and m.message_id not in placed:
                    sources.append(m)
                    placed.add(m.message_id)
        rows.append({"version": v.version, "content": v.content, "valid_from": v.valid_from, "valid_to": v.valid_to,
                     "recorded_at": v.recorded_at, "current": v.current, "run_id": run_id, "run": run,
                     "sources": sources, "left": round(left, 2), "width": round(max(right - left, 1.0), 2)})
    # messages no stored run holds any more (its run erased or pruned): named, linked by the fact's session
    unplaced = [mid for mid in fact.source_message_ids if mid not in placed]
    return {"fact": fact, "versions": rows, "unplaced": unplaced, "quoted_session": _quoted_session(fact, rows),
            "expired": validity.expired(fact, now)}


def _quoted_session(fact: Fact, rows: list[dict[str, Any]]) -> str | None:
    """The session of the message ``source_text`` quotes: the run that wrote the current
    version (an UPDATE replaces the quote with its own message, often of a later session)."""
    current = rows[-1] if rows else None
    if current is not None and current["run"] is not None:
        return current["run"].session_id
    return fact.source_session_id if len(rows) == 1 else None


def _writers(fact: Fact) -> list[str | None]:
    """The run that wrote each version: the first was formed by ``source_run_id`` (kept
    through UPDATEs); each history entry records the run that replaced it, i.e. the writer
    of the next version."""
    return [fact.source_run_id, *(h.run_id for h in fact.history)]


def run_detail(run: FormationRun, summary: dict[str, Any]) -> dict[str, Any]:
    """A run's stages as bars on one time axis (start offset and duration), with each stage's
    calls per model (tokens and cost) and error."""
    starts = [r.started_at for r in run.stages.values() if r.started_at]
    origin = min(starts) if starts else run.created_at
    ends = [r.finished_at or r.started_at for r in run.stages.values() if r.started_at]
    total = max(((max(ends) - origin).total_seconds() * 1000) if ends else 0.0, 1.0)
    stages = []
    for name, record in run.stages.items():
        offset = ((record.started_at - origin).total_seconds() * 1000) if record.started_at else 0.0
        ms = record.duration_ms or 0.0
        stages.append({"name": name, "status": record.status, "ms": ms, "attempts": record.attempts,
                       "error": record.error, "by_model": record.usage.by_model,
                       "left": round(offset / total * 100, 2), "width": round(max(ms / total * 100, 0.5), 2)})
    stages.sort(key=lambda s: s["left"])
    return {"run": run, "summary": summary, "stages": stages, "total_ms": total}


def bars(groups: dict[str, dict[str, Any]], value) -> list[dict[str, Any]]:
    """Rows of a horizontal bar chart drawn as SVG on the server: label, value, width in %."""
    values = {k: value(v) for k, v in groups.items()}
    top = max(values.values(), default=0) or 1
    return [{"label": k, "value": v, "width": round(v / top * 100, 2)} for k, v in values.items()]


def message_window(store, session_id: str, message_id: str, around: int = 3) -> dict[str, Any] | None:
    """A message with a few neighbours, and the runs of its session whose range holds it."""
    count = store.ingest.count_messages(session_id)
    messages = store.ingest.get_messages(session_id, 0, max(count, 1) * 2 + 10)
    index = next((i for i, m in enumerate(messages) if m.message_id == message_id), None)
    if index is None:
        return None
    target = messages[index]
    runs = [r for r in store.runs.list_runs(session_id=session_id, limit=1000)
            if target.seq is not None and r.seq_from <= target.seq <= r.seq_to]
    return {"message": target, "window": messages[max(0, index - around): index + around + 1], "runs": runs}


def category_choices(store, agent_id: str) -> list[str]:
    """The categories a search of ``agent_id`` may be filtered by (the defaults while no agent
    is named): its list now, and the names its facts may still be filed under."""
    return named_categories(store.ingest.get_agent_settings(agent_id)) if agent_id else list(DEFAULT_CATEGORIES)


def branch_rows(store, debug: dict[str, Any]) -> list[dict[str, Any]]:
    """Per query of a ``search_facts`` debug answer: every candidate with its semantic and text
    rank and score, its fused score, and whether it cleared the fused cut (``thresholds.rrf``)."""
    cut = debug.get("thresholds", {}).get("rrf")
    queries = []
    ids = {c["id"] for q in debug.get("queries", []) for b in ("semantic", "text", "fused") for c in q.get(b, [])}
    texts = {f.fact_id: f.content for f in store.facts.get_facts(sorted(ids))} if ids else {}
    for q in debug.get("queries", []):
        rows: dict[str, dict[str, Any]] = {}
        for branch in ("semantic", "text"):
            for rank, c in enumerate(q.get(branch, []), 1):
                row = rows.setdefault(c["id"], {"id": c["id"]})
                row[f"{branch}_rank"], row[f"{branch}_score"] = rank, c["score"]
        for c in q.get("fused", []):
            rows.setdefault(c["id"], {"id": c["id"]})["fused"] = c["score"]
        for row in rows.values():
            row["fact_id"] = row["id"]
            row["content"] = texts.get(row["fact_id"], "(no longer stored)")
            row["kept"] = row.get("fused") is not None and (cut is None or row["fused"] >= cut)
        ordered = sorted(rows.values(), key=lambda r: -(r.get("fused") or -1))
        queries.append({"query": q.get("query"), "timings_ms": q.get("timings_ms", {}), "rows": ordered, "cut": cut})
    return queries
