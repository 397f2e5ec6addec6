"""A user's own page in the inspector (design §12, §13): what the agent remembers about the
signed-in person and where each item came from, in plain words. The same reads as the HTTP
API's ``GET …/users/{u}/memory`` (``api.user_memory.list_memory``); the page names no internal
thing (scope keys, versions, run ids, fusion scores: tests/ui/test_own_page.py scans for them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api import user_memory
from api.ui.views import sections
from schemas import api as m
from schemas.documents import Fact
from usecases.withdraw import refusal, shared_with_others


def _day(at: datetime) -> str:
    """``3 March 2026``: a date as people write it (``%-d`` is not portable)."""
    return f"{at.day} {at:%B %Y}"


def _origin(item: m.MyFact | m.MyReflection) -> dict[str, Any]:
    """Where an item came from: the day it was first formed and, when the message is known, a
    link to it (the message page shows it among its neighbours)."""
    src = item.source
    link = f"/ui/messages/{src.session_id}/{src.message_ids[-1]}" if src.session_id and src.message_ids else None
    return {"day": _day(item.formed_at), "link": link,
            "by_you": src.run_id is not None and src.run_id.startswith("edit:")}


def _fact(f: m.MyFact) -> dict[str, Any]:
    return {"id": f.id, "content": f.content, "editable": f.editable, "origin": _origin(f),
            "changed": len(f.history), "until": f"{_day(f.expires_at)}, {f.expires_at:%H:%M} UTC" if f.expires_at else None}


def own_memory(store, agent_id: str, user_id: str, now: datetime) -> dict[str, Any]:
    """What the page shows: the agent's name, whether it remembers the person at all, the
    summary about them, their facts, the shared facts learned only from them, the notes not yet
    summed up, and the conversations they had alone with it."""
    mine = user_memory.list_memory(store, agent_id, user_id, now)
    name = store.ingest.get_agent_settings(agent_id).name or agent_id
    resting = store.provenance.resting_on(user_id, agent_id)
    with_others = shared_with_others([*resting.facts, *resting.reflections], user_id, now)
    return {
        "agent_name": name, "remembering": mine.user_memory_enabled,
        "summary": sections(mine.blob.content if mine.blob else ""),
        "facts": [_fact(f) for f in mine.facts],
        "shared": [_fact(f) for f in mine.shared_facts],
        "notes": [{"id": r.id, "content": r.content, "origin": _origin(r)}
                  for r in [*mine.reflections, *mine.shared_reflections] if not r.absorbed],
        # what rests on them and on other people: theirs to take their part out of (design §13)
        "with_others": [{"kind": "facts" if isinstance(i, Fact) else "reflections",
                         "id": i.fact_id if isinstance(i, Fact) else i.reflection_id, "content": i.content,
                         "refused": refusal(store, i, user_id)} for i in with_others],
        "conversations": [{"summary": sections(s.blob.content if s.blob else ""),
                           "notes": [{"id": r.id, "content": r.content, "origin": _origin(r)} for r in s.reflections]}
                          for s in mine.sessions],
    }
