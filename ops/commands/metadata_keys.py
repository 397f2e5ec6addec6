"""``memoryctl metadata-keys``: the event metadata keys an agent's facts keep (design §13
"Categories and metadata").

    memoryctl metadata-keys show AGENT [--json]
    memoryctl metadata-keys set AGENT KEY [KEY ...] | --none

The same checks as ``PUT /v1/agents/{a}/metadata-keys`` (``usecases.metadata_keys``), audited
as done by ``cli``. Facts formed afterwards keep these keys; facts already formed keep theirs.
"""

from __future__ import annotations

import argparse
import json

from ops.commands.owner import _audited, _open


def _print(found, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"agent_id": found.agent_id, "metadata_keys": found.keys}, sort_keys=True))
        return
    kept = ", ".join(found.keys) if found.keys else "none (facts keep no metadata)"
    print(f"agent {found.agent_id}: facts formed from now on keep the metadata keys: {kept}")


def _show(args: argparse.Namespace) -> int:
    from usecases import metadata_keys

    store = _open()
    try:
        _print(metadata_keys.show(store.ingest, args.agent_id), args.json)
    finally:
        store.close()
    return 0


def _set(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from pipeline.errors import InvalidInput
    from usecases import metadata_keys

    if bool(args.keys) == bool(args.none):
        raise InvalidInput("KEY", "give the keys facts keep, or --none for no key (not both)")
    store = _open()
    try:
        found = _audited(store, metadata_keys.set_keys(store.ingest, args.agent_id, args.keys, now=Clock().now(),
                                                       where="KEY"))
    finally:
        store.close()
    _print(found, args.json)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metadata-keys", help="the event metadata keys an agent's facts keep: show, set")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    show = verbs.add_parser("show", help="the keys facts keep now")
    show.add_argument("agent_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)
    put = verbs.add_parser("set", help="the keys facts formed from now on keep (facts formed before keep theirs)")
    put.add_argument("agent_id")
    put.add_argument("keys", nargs="*", metavar="KEY", help="a metadata key: a letter, then letters, digits, _, . or -")
    put.add_argument("--none", action="store_true", help="keep no metadata key")
    put.add_argument("--json", action="store_true")
    put.set_defaults(func=_set)
