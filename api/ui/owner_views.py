"""What the owner's inspector pages show (design §13 "Owner controls"): an agent's overview
(counts, recent changes, this month's cost, what is paused, the instructions) and its curation
page (the shared facts, the pending shared reflections, the shared blob's sections, every
instruction version). Plain values for the templates, read through the store port and the
ops functions the CLI and the HTTP API use; no HTML and no writes here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.ui.views import EPOCH, PAGE_SIZE, sections
from usecases.cost import cost_report
from pipeline import cost, validity
from pipeline.owner import controls
from pipeline.search.filter_text import pair_lines
from schemas.documents import Fact, scope_key
from schemas.owner import INSTRUCTION_SCOPES, INSTRUCTION_STAGES

AGENT = scope_key("agent")
RECENT_CHANGES = 12


def _change(fact: Fact) -> str:
    """What last happened to a fact, in words."""
    if fact.retired_at is not None:
        return f"retired ({fact.retired_reason})" if fact.retired_reason else "retired"
    return "edited" if fact.version > 1 else "new"


def _paused(settings) -> list[str]:
    return ["everything" if p.scope_key == "*" else p.scope_key for p in settings.paused]


def _current_instructions(settings) -> list[dict[str, Any]]:
    latest = {(i.stage, i.scope): i for i in sorted(settings.instructions, key=lambda i: i.version)}
    return [{"stage": stage, "scope": scope, "version": i.version, "text": i.text, "set_at": i.set_at}
            for (stage, scope), i in sorted(latest.items()) if i.text]


def overview(store, agent_id: str, now: datetime) -> dict[str, Any]:
    """One agent at a glance: live facts, pending reflections, people and sessions with memory,
    the newest fact changes of every scope, the cost since the 1st of this month (UTC), and
    the owner's controls in force."""
    settings = store.ingest.get_agent_settings(agent_id)
    keys = store.facts.memory_scope_keys(agent_id)
    people = sorted(k.partition(":")[2] for k in keys if k.startswith("user:"))
    sessions = sorted(k.partition(":")[2] for k in keys if k.startswith("session:"))
    pending = store.reflections.count_unabsorbed(agent_id, keys) if keys else {}
    changes = store.facts.recent_facts(agent_id, keys, EPOCH, RECENT_CHANGES, include_retired=True) if keys else []
    month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spent = cost_report(store, agent_id, since=month)["total"]
    return {
        "agent_id": agent_id, "agent_name": settings.name, "month": month,
        "counts": {"facts": sum(store.facts.count_facts(agent_id, k) for k in keys),
                   "pending": sum(pending.values()), "people": len(people), "sessions": len(sessions)},
        "people": people, "sessions": sessions,
        "changes": [{"fact": f, "what": "expired" if f.retired_at is None and validity.expired(f, now) else _change(f),
                     "when": f.changed_at} for f in changes],
        "cost": cost.describe(spent), "calls": sum(int(r.get("calls") or 0) for r in spent["by_model"].values()),
        "paused": _paused(settings), "instructions": _current_instructions(settings),
        "user_memory": settings.user_memory_enabled, "agent_memory": settings.agent_memory_enabled,
    }


def curation(store, agent_id: str, now: datetime) -> dict[str, Any]:
    """The shared memory an owner curates: the newest live agent-scope facts (a fact whose
    expiry passed is marked, not hidden: beat has not stamped it yet, and reads leave it out
    already), the shared reflections waiting for consolidation, the shared blob's sections,
    every instruction version and what is paused."""
    settings = store.ingest.get_agent_settings(agent_id)
    facts = store.facts.list_facts(agent_id, AGENT, limit=PAGE_SIZE)
    blob = store.blobs.get_blob(agent_id, AGENT)
    history = controls.list_instructions(store.ingest, agent_id)
    return {
        "agent_id": agent_id, "agent_name": settings.name,
        "facts": [{"fact": f, "expired": validity.expired(f, now), "metadata": pair_lines(f.metadata)}
                  for f in facts],
        "metadata_keys": settings.metadata_keys,
        "total": store.facts.count_facts(agent_id, AGENT),
        "reflections": store.reflections.unabsorbed_reflections(agent_id, AGENT),
        "sections": sections(blob.consolidated_content if blob else ""),
        "blob_version": blob.version if blob else 0,
        "instructions": _current_instructions(settings), "history": history,
        "stages": INSTRUCTION_STAGES, "scopes": INSTRUCTION_SCOPES,
        "paused": [{"key": p.scope_key, "label": "everything" if p.scope_key == "*" else p.scope_key,
                    "target": "all" if p.scope_key == "*" else "agent" if p.scope_key == AGENT else "session",
                    "session_id": p.scope_key.partition(":")[2] or None, "since": p.paused_at}
                   for p in settings.paused],
    }
