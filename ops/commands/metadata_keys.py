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

from ops.commands.owner import _audited, agent_verb, on_store


def _print(found, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"agent_id": found.agent_id, "metadata_keys": found.keys}, sort_keys=True))
        return
    kept = ", ".join(found.keys) if found.keys else "none (facts keep no metadata)"
    print(f"agent {found.agent_id}: facts formed from now on keep the metadata keys: {kept}")


def _show(args: argparse.Namespace) -> int:
    from usecases import metadata_keys

    _print(on_store(lambda store: metadata_keys.show(store.ingest, args.agent_id)), args.json)
    return 0


def _set(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from pipeline.errors import InvalidInput
    from usecases import metadata_keys

    if bool(args.keys) == bool(args.none):
        raise InvalidInput("KEY", "give the keys facts keep, or --none for no key (not both)")
    found = on_store(lambda store: _audited(store, metadata_keys.set_keys(
        store.ingest, args.agent_id, args.keys, now=Clock().now(), where="KEY")))
    _print(found, args.json)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metadata-keys", help="the event metadata keys an agent's facts keep: show, set")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    agent_verb(verbs, "show", "the keys facts keep now", _show)
    agent_verb(verbs, "set", "the keys facts formed from now on keep (facts formed before keep theirs)", _set,
               (("keys",), dict(nargs="*", metavar="KEY", help="a metadata key: a letter, then letters, digits, _, . "
                                                               "or -")),
               (("--none",), dict(action="store_true", help="keep no metadata key")))
