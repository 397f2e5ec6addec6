"""``memoryctl curate``: an owner's edits of an agent's shared memory (design §13), the same
checks as the HTTP routes (``pipeline.owner``), audited as done by ``cli``.

    memoryctl curate facts AGENT [--limit 50] [--json]
    memoryctl curate edit-fact AGENT FACT_ID --text T        # an UPDATE with history, screened
    memoryctl curate delete-fact AGENT FACT_ID
    memoryctl curate reflections AGENT                       # agent-scope, waiting for consolidation
    memoryctl curate edit-reflection AGENT REFLECTION_ID --text T
    memoryctl curate delete-reflection AGENT REFLECTION_ID
    memoryctl curate edit-section AGENT SECTION --line L [--line L2 ...] [--session S]   # none: remove it
    memoryctl curate replace-blob AGENT --user U --file F    # a user's whole blob
"""

from __future__ import annotations

import argparse
import json
from functools import cached_property
from pathlib import Path

from pipeline.errors import InvalidInput
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


def _audit(deps, action: str, agent_id: str, subject: str, **counts: int) -> None:
    from api.audit import audit

    audit(deps.store, deps.clock.now(), "cli", "cli", action, agent_id=agent_id, subject=subject, counts=counts)


def _agent_fact(deps, agent_id: str, fact_id: str):
    found = next((f for f in deps.store.facts.get_facts([fact_id])
                  if f.agent_id == agent_id and f.scope_key == "agent" and f.retired_at is None), None)
    if found is None:
        raise InvalidInput("FACT_ID", f"no live fact {fact_id!r} in agent {agent_id}'s shared memory "
                                      "(memoryctl curate facts lists them)")
    return found


def _pending(deps, agent_id: str, reflection_id: str):
    found = next((r for r in deps.store.reflections.unabsorbed_reflections(agent_id, "agent") if r.reflection_id == reflection_id),
                 None)
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
        return "\n".join(f"{row['id']}  {row['content']}" for row in out) or "nothing"
    return out["message"]


def _facts(deps, args) -> list[dict]:
    return [{"id": f.fact_id, "content": f.content, "version": f.version, "formed_at": f.formed_at}
            for f in deps.store.facts.list_facts(args.agent_id, "agent", limit=args.limit)]


def _reflections(deps, args) -> list[dict]:
    return [{"id": r.reflection_id, "content": r.content, "formed_at": r.formed_at}
            for r in deps.store.reflections.unabsorbed_reflections(args.agent_id, "agent")]


def _edit_fact(deps, args) -> dict:
    from pipeline.owner.curation import edit_fact

    fact = _agent_fact(deps, args.agent_id, args.item_id)
    updated = edit_fact(deps, fact, args.text, people=list(fact.source_user_ids), where="--text")
    if updated is None:
        raise InvalidInput("--text", "the fact changed meanwhile, or another agent fact already says this")
    _audit(deps, "item.edit", args.agent_id, "agent", facts=1)
    return {"id": updated.fact_id, "version": updated.version, "message": f"{updated.fact_id} is now version "
            f"{updated.version}: {updated.content}"}


def _edit_reflection(deps, args) -> dict:
    from pipeline.owner.curation import edit_reflection

    found = _pending(deps, args.agent_id, args.item_id)
    edited = edit_reflection(deps.store, deps.settings, found, args.text, by="cli", now=deps.clock.now(),
                             people=list(found.source_user_ids), where="--text")
    if edited is None:
        raise InvalidInput("REFLECTION_ID", "a consolidation absorbed it meanwhile; edit the blob instead")
    _audit(deps, "item.edit", args.agent_id, "agent", reflections=1)
    return {"id": edited.reflection_id, "message": f"{edited.reflection_id}: {edited.content}"}


def _delete(deps, args) -> dict:
    from ops.user_data import delete_items, deletion_plan

    item = _agent_fact(deps, args.agent_id, args.item_id) if args.action == "delete-fact" \
        else _pending(deps, args.agent_id, args.item_id)
    counts = delete_items(deps, deletion_plan(deps.store, item), holder="curate:cli")
    kind = "facts" if args.action == "delete-fact" else "reflections"
    _audit(deps, "item.delete", args.agent_id, "agent", **{kind: 1})
    return {"deleted": args.item_id, "counts": counts, "message": f"deleted {args.item_id}"}


def _blob_out(blob, what: str) -> dict:
    return {"scope_key": blob.scope_key, "version": blob.version, "content": blob.consolidated_content,
            "message": f"{what}: {blob.scope_key} version {blob.version}\n{blob.consolidated_content}"}


def _edit_section(deps, args) -> dict:
    from pipeline.owner.blobs import edit_section

    key = f"session:{args.session}" if args.session else "agent"
    blob = edit_section(deps.store, deps.settings, args.agent_id, key, args.section, args.line or [], by="cli",
                        now=deps.clock.now())
    _audit(deps, "blob.edit", args.agent_id, "session" if args.session else "agent", version=blob.version)
    return _blob_out(blob, "section written")


def _replace_blob(deps, args) -> dict:
    from pipeline.owner.blobs import replace_user_blob
    from schemas.access import subject_digest

    try:
        content = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput("--file", f"cannot read {args.file}: {exc}") from None
    blob = replace_user_blob(deps.store, deps.settings, args.agent_id, args.user, content, by="cli",
                             now=deps.clock.now())
    _audit(deps, "blob.replace", args.agent_id, subject_digest(args.agent_id, args.user), version=blob.version)
    return _blob_out(blob, "blob replaced")


_ACTIONS = {"facts": _facts, "reflections": _reflections, "edit-fact": _edit_fact, "delete-fact": _delete,
            "edit-reflection": _edit_reflection,
            "delete-reflection": _delete, "edit-section": _edit_section, "replace-blob": _replace_blob}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("curate", help="an owner's edits of an agent's shared memory and of a user's blob")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    helps = {"facts": "the agent-scope facts, newest first", "reflections": "agent-scope reflections not yet merged",
             "edit-fact": "edit an agent-scope fact (an UPDATE with history, screened)",
             "delete-fact": "delete an agent-scope fact with its history",
             "edit-reflection": "edit an agent-scope reflection waiting for consolidation (history kept)",
             "delete-reflection": "delete an agent-scope reflection waiting for consolidation",
             "edit-section": "rewrite one section of the agent's (or a session's) blob; no --line removes it",
             "replace-blob": "replace a user's blob with a file's text ([SECTION] headers, '- ' lines)"}
    for name, text in helps.items():
        a = actions.add_parser(name, help=text)
        a.add_argument("agent_id")
        if name in ("edit-fact", "delete-fact", "edit-reflection", "delete-reflection"):
            a.add_argument("item_id")
        if name == "facts":
            a.add_argument("--limit", type=int, default=50)
        if name in ("edit-fact", "edit-reflection"):
            a.add_argument("--text", required=True)
        if name == "edit-section":
            a.add_argument("section")
            a.add_argument("--line", action="append", help="one line of the section (repeat for more)")
            a.add_argument("--session", help="a session's blob instead of the agent's")
        if name == "replace-blob":
            a.add_argument("--user", required=True)
            a.add_argument("--file", required=True)
        a.add_argument("--json", action="store_true")
        a.set_defaults(func=_run)
