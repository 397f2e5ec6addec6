"""``memoryctl categories``: an agent's category list (design §13 "Categories and metadata").

    memoryctl categories show AGENT [--json]
    memoryctl categories set AGENT NAME [NAME ...] | --default | --none
    memoryctl categories rollback AGENT --version N

The same checks as ``PUT /v1/agents/{a}/categories`` (``usecases.categories``), audited as
done by ``cli``.
"""

from __future__ import annotations

import argparse
import json

from ops.commands.owner import _audited, _open, agent_verb, on_store


def _print(found, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"agent_id": found.agent_id, "categories": found.names, "version": found.version,
                          "history": [v.model_dump(mode="json") for v in found.history]}, sort_keys=True))
        return
    for v in found.history:
        back = f" (rollback to v{v.rolled_back_to})" if v.rolled_back_to else ""
        print(f"v{v.version:<3} {v.set_at.isoformat()} by {v.set_by}{back}: {', '.join(v.names) or '(none)'}")
    origin = "the default list" if found.version == 0 else f"version {found.version}"
    print(f"agent {found.agent_id} files new facts under ({origin}): {', '.join(found.names) or '(no category)'}")


def _show(args: argparse.Namespace) -> int:
    from usecases import categories

    _print(on_store(lambda store: categories.show(store.ingest, args.agent_id)), args.json)
    return 0


def _change(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from pipeline.errors import InvalidInput
    from usecases import categories

    if args.verb == "set" and bool(args.names) + args.default + args.none != 1:
        raise InvalidInput("NAME", "give the category names, --default for the default list, or --none for no "
                                   "category at all (one of the three)")
    store, now = _open(), Clock().now()
    try:
        if args.verb == "rollback":
            found = categories.rollback(store.ingest, args.agent_id, args.version, by="cli", now=now)
        elif args.default:
            found = categories.reset(store.ingest, args.agent_id, by="cli", now=now)
        elif args.none:   # an empty list: extraction files no fact under any category
            found = categories.set_list(store.ingest, args.agent_id, [], by="cli", now=now, where="--none")
        else:
            found = categories.set_list(store.ingest, args.agent_id, args.names, by="cli", now=now, where="NAME")
        _audited(store, found)
    finally:
        store.close()
    _print(found, args.json)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("categories", help="an agent's categories: show, set, roll back")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    agent_verb(verbs, "show", "the current list and every version", _show)
    agent_verb(verbs, "set", "set a new version of the list (new facts are filed under it)", _change,
               (("names",), dict(nargs="*", metavar="NAME", help="a category: lower-case letters, digits and _")),
               (("--default",), dict(action="store_true", help="the default list")),
               (("--none",), dict(action="store_true", help="no category at all: new facts are filed under none")))
    agent_verb(verbs, "rollback", "bring back an earlier version's list", _change,
               (("--version",), dict(type=int, required=True)))
