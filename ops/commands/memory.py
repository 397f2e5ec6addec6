"""``memoryctl memory``: what an agent knows about one person, item by item (issue 23, Build 6).

    memoryctl memory --agent a1 --user u1 [--session s1] [--as-of ISO] [--json]

``stats`` gives counts; this lists the items themselves, with where each came from:
- the person's user scope: the consolidated blob by section, the recent reflections (the
  buffered ones first in mind: those are in the context beside the blob) and the live facts;
- with ``--session``, that session's blob and reflections (sessions hold no facts);
- shared agent memory that rests on the person's messages (its ``source_user_ids`` name them).

Every reflection and fact shows its source session and message ids, and its age counted to
``--as-of`` (default now). With ``--as-of`` the view is memory as it was valid then
(``pipeline.validity``): the fact texts valid at that time, a blob only if consolidated by
then, reflections formed by then.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from ops.commands.read import AS_OF_HELP, _iso_time
from schemas.settings import get_settings

#: reflections listed per scope, newest first (the context shows at most 20 buffered ones)
RECENT_REFLECTIONS = 20
#: message ids shown per item at a terminal (``--json`` has them all)
SHOWN_MESSAGE_IDS = 3


def person_memory(store, agent_id: str, user_id: str, session_id: str | None, as_of: datetime | None,
                  now: datetime) -> dict[str, Any]:
    """The view as plain data (what ``--json`` prints). ``as_of`` None means now."""
    from pipeline.context import format_age
    from schemas.documents import scope_key

    when = as_of or now
    settings = store.ingest.get_agent_settings(agent_id)
    scopes = [("user", scope_key("user", user_id=user_id))]
    if session_id:
        scopes.append(("session", scope_key("session", session_id=session_id)))
    out: dict[str, Any] = {
        "agent_id": agent_id, "user_id": user_id, "session_id": session_id,
        "as_of": _iso(as_of), "now": _iso(now), "user_memory_enabled": settings.user_memory_enabled,
        "scopes": [],
    }
    for scope, key in scopes:
        reflections = [r for r in store.reflections.list_reflections(agent_id, key) if r.formed_at <= when]
        facts = _facts(store, agent_id, key, as_of, when) if scope == "user" else []
        out["scopes"].append({
            "scope": scope, "scope_key": key,
            "blob": _blob(store.blobs.get_blob(agent_id, key), when, format_age),
            "reflections": [_reflection(r, when, format_age) for r in _newest(reflections)],
            "reflections_total": len(reflections),
            "facts": [_fact(f, text, changed, when, format_age) for f, text, changed in facts],
        })
    # what rests on the person, through the provenance query: listing the agent scope and
    # filtering it read every other user's shared items too
    resting = store.provenance.resting_on(user_id, agent_id)
    shared_reflections = [r for r in resting.reflections
                          if r.scope_key == "agent" and user_id in r.source_user_ids and r.formed_at <= when]
    shared_facts = _as_listed([f for f in resting.facts if f.scope_key == "agent" and user_id in f.source_user_ids],
                              as_of, when)
    out["shared"] = {
        "scope_key": "agent",
        "reflections": [_reflection(r, when, format_age) for r in _newest(shared_reflections)],
        "reflections_total": len(shared_reflections),
        "facts": [_fact(f, text, changed, when, format_age) for f, text, changed in shared_facts],
    }
    return out


def _newest(reflections: list) -> list:
    return sorted(reflections, key=lambda r: (r.formed_at, r.reflection_id), reverse=True)[:RECENT_REFLECTIONS]


def _facts(store, agent_id: str, key: str, as_of: datetime | None, when: datetime) -> list[tuple]:
    """(fact, text, latest change) of the scope's facts live now, or of the texts valid at
    ``as_of``, latest change first."""
    return _as_listed(store.facts.list_facts(agent_id, key, include_retired=as_of is not None), as_of, when)


def _as_listed(facts: list, as_of: datetime | None, when: datetime) -> list[tuple]:
    """(fact, text, latest change) of those of ``facts`` live now (newest first, as
    ``list_facts`` orders them; an expired one is out, stamped or not), or of their texts valid
    at ``as_of``, latest change first."""
    if as_of is None:
        from pipeline.validity import expired

        live = sorted((f for f in facts if f.retired_at is None and not expired(f, when)),
                      key=lambda f: f.formed_at, reverse=True)
        return [(f, f.content, f.changed_at) for f in live]
    from pipeline.validity import valid_at

    return [(v.fact, v.content, min(v.recorded_at, when)) for v in valid_at(facts, as_of)]


def _blob(blob, when: datetime, format_age) -> dict[str, Any] | None:
    from pipeline.prompts.consolidation import parse_blob

    if blob is None or blob.last_consolidated_at is None or blob.last_consolidated_at > when:
        return None
    _, sections = parse_blob(blob.consolidated_content)
    return {
        "version": blob.version, "word_limit": blob.word_limit,
        "last_consolidated_at": _iso(blob.last_consolidated_at),
        "age": format_age(blob.last_consolidated_at, when),
        "sections": [{"name": s.name, "bullets": list(s.bullets)} for s in sections],
    }


def _reflection(r, when: datetime, format_age) -> dict[str, Any]:
    absorbed = r.absorbed and (r.absorbed_at is None or r.absorbed_at <= when)
    return {
        "id": r.reflection_id, "content": r.content, "formed_at": _iso(r.formed_at),
        "age": format_age(r.formed_at, when), "absorbed": absorbed,
        "blob_version": r.consolidated_into if absorbed else None,
        "source_session_id": r.source_session_id, "source_message_ids": list(r.source_message_ids),
    }


def _fact(f, text: str, changed: datetime, when: datetime, format_age) -> dict[str, Any]:
    return {
        "id": f.fact_id, "content": text, "scope": f.scope, "formed_at": _iso(f.formed_at),
        "updated_at": _iso(changed), "age": format_age(changed, when), "version": f.version,
        "source_session_id": f.source_session_id, "source_message_ids": list(f.source_message_ids),
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# ----------------------------------------------------------------- terminal ----------------
def render(view: dict[str, Any]) -> str:
    """The view for a person at a terminal."""
    when = f"as of {view['as_of']}" if view["as_of"] else f"now ({view['now']})"
    lines = [f"What agent {view['agent_id']} knows about user {view['user_id']}, {when}"]
    if not view["user_memory_enabled"]:
        lines.append("note: user memory is switched off for this agent (kept, but not formed or shown)")
    for scope in view["scopes"]:
        lines.append("")
        lines.append(f"== {scope['scope']} scope ({scope['scope_key']})")
        lines.extend(_render_blob(scope["blob"]))
        lines.extend(_render_reflections(scope["reflections"], scope["reflections_total"]))
        if scope["scope"] == "user":
            lines.extend(_render_facts(scope["facts"]))
    shared = view["shared"]
    lines.append("")
    lines.append(f"== shared agent memory from {view['user_id']}'s messages (agent)")
    if not shared["reflections"] and not shared["facts"]:
        lines.append("  (none)")
    else:
        lines.extend(_render_reflections(shared["reflections"], shared["reflections_total"]))
        lines.extend(_render_facts(shared["facts"]))
    return "\n".join(lines)


def _render_blob(blob: dict | None) -> list[str]:
    if blob is None:
        return ["  blob: (none yet)"]
    out = [f"  blob v{blob['version']}, consolidated {blob['age']} (limit {blob['word_limit']} words)"]
    for section in blob["sections"]:
        out.append(f"    [{section['name']}]")
        out.extend(f"      - {bullet}" for bullet in section["bullets"])
    return out


def _render_reflections(reflections: list[dict], total: int) -> list[str]:
    if not reflections:
        return ["  reflections: (none)"]
    shown = f"{len(reflections)} of {total}" if total > len(reflections) else str(total)
    out = [f"  reflections ({shown}, newest first)"]
    for r in reflections:
        where = f"in blob v{r['blob_version']}" if r["absorbed"] else "buffered"
        out.append(f"    - {r['content']}")
        out.append(f"        {r['age']}, {where}; {_source(r)}")
    return out


def _render_facts(facts: list[dict]) -> list[str]:
    if not facts:
        return ["  facts: (none)"]
    out = [f"  facts ({len(facts)} live, latest change first)"]
    for f in facts:
        version = f", v{f['version']}" if f["version"] > 1 else ""
        out.append(f"    - {f['content']}")
        out.append(f"        {f['age']}{version}; {_source(f)}; {f['id']}")
    return out


def _source(item: dict) -> str:
    ids = item["source_message_ids"]
    if not ids:
        return f"session {item['source_session_id'] or '?'}, no message ids recorded"
    more = f" and {len(ids) - SHOWN_MESSAGE_IDS} more" if len(ids) > SHOWN_MESSAGE_IDS else ""
    return f"session {item['source_session_id'] or '?'}, messages {', '.join(ids[:SHOWN_MESSAGE_IDS])}{more}"


def _memory(args: argparse.Namespace) -> int:
    from ops.stores import open_existing
    from pipeline.clock import Clock

    store = open_existing(get_settings())
    try:
        view = person_memory(store, args.agent, args.user, args.session, args.as_of, Clock().now())
    finally:
        store.close()
    print(json.dumps(view) if args.json else render(view))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="what the agent knows about one person: blobs, reflections, facts, sources")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--user", required=True, help="the person's user id")
    p.add_argument("--session", help="also show this session's memory")
    p.add_argument("--as-of", type=_iso_time, default=None, help=AS_OF_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_memory)

