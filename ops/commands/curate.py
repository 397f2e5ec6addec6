"""``memoryctl curate``: an owner's edits of an agent's shared memory (design §13), the same
checks as the HTTP routes (``pipeline.owner``), audited as done by ``cli``.

    memoryctl curate facts AGENT [--limit 50] [--json]
    memoryctl curate edit-fact AGENT FACT_ID --text T [--expires WHEN | --no-expiry] [--category C ...]
                               [--meta K=V ... | --no-meta]   # metadata replaced
                                                             # an UPDATE with history, screened
    memoryctl curate delete-fact AGENT FACT_ID
    memoryctl curate reflections AGENT                       # agent-scope, waiting for consolidation
    memoryctl curate edit-reflection AGENT REFLECTION_ID --text T
    memoryctl curate delete-reflection AGENT REFLECTION_ID
    memoryctl curate edit-section AGENT SECTION --line L [--line L2 ...] [--session S]   # none: remove it
    memoryctl curate replace-blob AGENT --user U --file F    # a user's whole blob
    memoryctl curate add-fact AGENT --text T [--user U] [--expires WHEN] [--category C ...] [--meta K=V ...]
    memoryctl curate add-reflection AGENT --text T [--user U | --session S]   # into that buffer
"""

from __future__ import annotations

import argparse
import json
from functools import cached_property
from pathlib import Path

from ops.commands import meta_dict, meta_pair
from pipeline.errors import InvalidInput
from pipeline.search.filter_text import metadata_pairs
from pipeline.validity import expired
from schemas.settings import get_settings


def _deps():
    """The workers' clients (the embedder: an edited fact is embedded again; the LLM only if a
    deletion had to merge a blob again), over the existing store: a command never creates one.
    Imported here: Celery loads with the workers' module, which other commands do without."""
    from workers.deps import Deps

    class Existing(Deps):
        @cached_property
        def store(self):
            from ops.stores import open_existing

            return open_existing(self.settings)

    return Existing(get_settings())


def _audited(deps, result):
    """The edited item, the use case's audit entry recorded as done by ``cli``."""
    from usecases.audit import CLI, recorded

    return recorded(deps.store.access, deps.clock.now(), CLI, result).item


def _agent_fact(deps, agent_id: str, fact_id: str):
    from usecases.edit import agent_fact

    found = agent_fact(deps.store, agent_id, fact_id)
    if found is None:
        raise InvalidInput("FACT_ID", f"no live fact {fact_id!r} in agent {agent_id}'s shared memory "
                                      "(memoryctl curate facts lists them)")
    return found


def _pending(deps, agent_id: str, reflection_id: str):
    from usecases.edit import pending_agent_reflection

    found = pending_agent_reflection(deps.store, agent_id, reflection_id)
    if found is None:
        raise InvalidInput("REFLECTION_ID", f"no agent-scope reflection {reflection_id!r} waiting for consolidation")
    return found


def _run(args: argparse.Namespace) -> int:
    deps = _deps()
    try:
        out = _ACTIONS[args.action](deps, args)
    finally:
        if "store" in deps.__dict__:
            deps.store.close()
    print(json.dumps(out, sort_keys=True, default=str) if args.json else _text(out))
    return 0


def _text(out) -> str:
    if isinstance(out, list):
        return "\n".join(f"{row['id']}  {row['content']}{_filed(row)}" for row in out) or "nothing"
    return out["message"]


def _filed(row: dict) -> str:
    """A fact's categories and metadata after its text, as much as it has."""
    filed = f"  [{', '.join(row['categories'])}]" if row.get("categories") else ""
    return filed + (f"  {json.dumps(row['metadata'], ensure_ascii=False)}" if row.get("metadata") else "")


def _facts(deps, args) -> list[dict]:
    """Newest first; a fact whose expiry passed (beat has not stamped it yet) is marked expired:
    it is out of every read already."""
    from usecases.edit import agent_facts

    now = deps.clock.now()
    facts, _ = agent_facts(deps.store, args.agent_id, limit=args.limit)
    return [{"id": f.fact_id, "content": f.content + (" (expired)" if expired(f, now) else ""), "version": f.version,
             "formed_at": f.formed_at, "expires_at": f.expires_at, "expired": expired(f, now), "categories": f.categories,
             "metadata": f.metadata}
            for f in facts]


def _expiry(text: str | None):
    """``--expires``: a date (the end of that day, UTC, as extraction reads one) or a date and
    time with its offset."""
    if text is None:
        return None
    from pipeline.formation.facts import parse_expiry

    found = parse_expiry(text)
    if found is None:
        raise InvalidInput("--expires", f"expected a date such as 2027-03-10 or a time with its offset such as "
                                        f"2027-03-10T17:00:00+00:00, got {text!r}")
    return found


def _reflections(deps, args) -> list[dict]:
    from usecases.edit import pending_agent_reflections

    return [{"id": r.reflection_id, "content": r.content, "formed_at": r.formed_at}
            for r in pending_agent_reflections(deps.store, args.agent_id)]


def _edit_fact(deps, args) -> dict:
    from usecases.edit import edit_agent_fact

    fact = _agent_fact(deps, args.agent_id, args.item_id)
    if expired(fact, deps.clock.now()):
        raise InvalidInput("FACT_ID", f"{fact.fact_id} expired at {fact.expires_at.isoformat()}; delete it, "
                                      "or write the text anew")
    edited = edit_agent_fact(deps, fact, args.text, where="--text", expires_at=_expiry(args.expires),
                             clear_expiry=args.no_expiry, expiry_where="--expires", categories=args.categories,
                             categories_where="--category", metadata=_metadata_change(args),
                             metadata_where="--meta")
    if edited is None:
        raise InvalidInput("--text", "the fact changed meanwhile, or another agent fact already says this")
    updated = _audited(deps, edited)
    row = {"id": updated.fact_id, "version": updated.version, "categories": updated.categories,
           "metadata": updated.metadata}
    return {**row, "message": f"{updated.fact_id} is now version {updated.version}: {updated.content}{_filed(row)}"}


def _metadata_change(args):
    """The fact's metadata from now on: ``--meta`` pairs read as ``memoryctl search --meta``
    reads them (a key repeated holds each value), {} with ``--no-meta``, None (kept) without
    either."""
    if args.no_meta:
        return {}
    return metadata_pairs(args.meta or [], "--meta")


def _edit_reflection(deps, args) -> dict:
    from usecases.edit import edit_agent_reflection

    found = _pending(deps, args.agent_id, args.item_id)
    edited = edit_agent_reflection(deps.store, deps.settings, found, args.text, by="cli", now=deps.clock.now(),
                                   where="--text")
    if edited is None:
        raise InvalidInput("REFLECTION_ID", "a consolidation absorbed it meanwhile; edit the blob instead")
    reflection = _audited(deps, edited)
    return {"id": reflection.reflection_id, "message": f"{reflection.reflection_id}: {reflection.content}"}


def _delete(deps, args) -> dict:
    from usecases.edit import delete_agent_item

    item = _agent_fact(deps, args.agent_id, args.item_id) if args.action == "delete-fact" \
        else _pending(deps, args.agent_id, args.item_id)
    counts = _audited(deps, delete_agent_item(deps, item, holder="curate:cli"))
    return {"deleted": args.item_id, "counts": counts, "message": f"deleted {args.item_id}"}


def _blob_out(blob, what: str) -> dict:
    return {"scope_key": blob.scope_key, "version": blob.version, "content": blob.consolidated_content,
            "message": f"{what}: {blob.scope_key} version {blob.version}\n{blob.consolidated_content}"}


def _edit_section(deps, args) -> dict:
    from usecases.edit import edit_section

    key = f"session:{args.session}" if args.session else "agent"
    blob = _audited(deps, edit_section(deps.store, deps.settings, args.agent_id, key, args.section, args.line or [],
                                       by="cli", now=deps.clock.now(), subject=key.split(":")[0],
                                       session_where="--session"))
    return _blob_out(blob, "section written")


def _replace_blob(deps, args) -> dict:
    from usecases.edit import replace_user_blob

    try:
        content = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput("--file", f"cannot read {args.file}: {exc}") from None
    blob = _audited(deps, replace_user_blob(deps.store, deps.settings, args.agent_id, args.user, content, by="cli",
                                            now=deps.clock.now()))
    return _blob_out(blob, "blob replaced")


def _add_fact(deps, args) -> dict:
    from usecases.writes import FactWrite, add_fact, written

    fact = _audited(deps, written(add_fact(deps, FactWrite(
        args.agent_id, args.text, "owner", user_id=args.user, expires_at=_expiry(args.expires),
        categories=args.categories or [], metadata=meta_dict(args.meta), where="--text", categories_where="--category",
        metadata_where="--meta"))))
    return {"id": fact.fact_id, "scope_key": fact.scope_key, "content": fact.content,
            "message": f"added {fact.fact_id} to {fact.scope_key}: {fact.content}"}


def _add_reflection(deps, args) -> dict:
    from usecases.writes import ReflectionWrite, add_reflection, written

    reflection = _audited(deps, written(add_reflection(deps, ReflectionWrite(
        args.agent_id, args.text, "owner", user_id=args.user, session_id=args.session, where="--text",
        session_where="--session"))))
    return {"id": reflection.reflection_id, "scope_key": reflection.scope_key, "content": reflection.content,
            "message": f"added {reflection.reflection_id} to the {reflection.scope_key} buffer: {reflection.content}"}



_ACTIONS = {"facts": _facts, "reflections": _reflections, "edit-fact": _edit_fact, "delete-fact": _delete,
            "edit-reflection": _edit_reflection,
            "delete-reflection": _delete, "edit-section": _edit_section, "replace-blob": _replace_blob,
            "add-fact": _add_fact, "add-reflection": _add_reflection}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("curate", help="an owner's edits of an agent's shared memory and of a user's blob")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {"facts": "the agent-scope facts, newest first", "reflections": "agent-scope reflections not yet merged",
             "edit-fact": "edit an agent-scope fact (an UPDATE with history, screened)",
             "delete-fact": "delete an agent-scope fact with its history",
             "edit-reflection": "edit an agent-scope reflection waiting for consolidation (history kept)",
             "delete-reflection": "delete an agent-scope reflection waiting for consolidation",
             "edit-section": "rewrite one section of the agent's (or a session's) blob; no --line removes it",
             "replace-blob": "replace a user's blob with a file's text ([SECTION] headers, '- ' lines)",
             "add-fact": "add a fact verbatim (no model call) to the agent's memory, or a user's with --user",
             "add-reflection": "add a reflection to the agent's buffer, a user's (--user) or a session's (--session)"}
    for name, text in helps.items():
        a = actions.add_parser(name, help=text)
        a.add_argument("agent_id")
        if name in ("edit-fact", "delete-fact", "edit-reflection", "delete-reflection"):
            a.add_argument("item_id")
        if name == "facts":
            a.add_argument("--limit", type=int, default=50)
        if name in ("edit-fact", "edit-reflection", "add-fact", "add-reflection"):
            a.add_argument("--text", required=True)
        if name == "edit-fact":
            when = a.add_mutually_exclusive_group()
            when.add_argument("--expires", metavar="WHEN",
                              help="when the fact stops being true (in the future): a date (its end, UTC) or a time "
                                   "with its offset")
            when.add_argument("--no-expiry", action="store_true", help="the fact no longer expires")
            a.add_argument("--category", action="append", dest="categories", metavar="NAME",
                           help="file it under this category of the agent's list (repeat for more); "
                                "none given: its categories stay")
            meta = a.add_mutually_exclusive_group()
            meta.add_argument("--meta", action="append", metavar="KEY=VALUE",
                              help="its metadata from now on, replacing what it holds: a value of one of the agent's "
                                   "filterable keys, read as memoryctl search --meta reads it (repeat for more; a "
                                   "key repeated holds each value); none given: its metadata stays")
            meta.add_argument("--no-meta", action="store_true", help="take every metadata value off the fact")
        if name in ("add-fact", "add-reflection"):
            a.add_argument("--user", help="a user's memory instead of the agent's")
        if name == "add-fact":
            a.add_argument("--expires", metavar="WHEN",
                           help="when the fact stops being true (in the future): a date (its end, UTC) or a time "
                                "with its offset")
            a.add_argument("--category", action="append", dest="categories", metavar="NAME",
                           help="file it under this category of the agent's list (repeat for more)")
            a.add_argument("--meta", action="append", type=meta_pair, metavar="KEY=VALUE",
                           help="a value of one of the agent's filterable metadata keys (repeat for more), read as "
                                "memoryctl publish --meta reads it")
        if name == "add-reflection":
            a.add_argument("--session", help="a session's buffer instead of the agent's")
        if name == "edit-section":
            a.add_argument("section")
            a.add_argument("--line", action="append", help="one line of the section (repeat for more)")
            a.add_argument("--session", help="a session's blob instead of the agent's")
        if name == "replace-blob":
            a.add_argument("--user", required=True)
            a.add_argument("--file", required=True)
        a.add_argument("--json", action="store_true")
        a.set_defaults(func=_run)
