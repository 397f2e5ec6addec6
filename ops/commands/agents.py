"""``memoryctl agent set|show``: an agent's display name and memory toggles (design §1, §3)."""

from __future__ import annotations

import argparse
import json

from pipeline.errors import InvalidInput
from schemas.settings import get_settings

_SWITCH = {"on": True, "off": False}


def _store(*, create: bool):
    from ops import stores

    settings = get_settings()
    return stores.open_or_create(settings) if create else stores.open_existing(settings)


def _show(settings) -> dict:
    return settings.model_dump(mode="json")


def _set(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock

    if not args.agent_id.strip():
        raise InvalidInput("AGENT_ID", "must be a non-empty agent id")
    store = _store(create=True)
    try:
        current = store.ingest.get_agent_settings(args.agent_id)
        update = {"updated_at": Clock().now()}
        if args.name is not None:
            update["name"] = args.name
        if args.user_memory is not None:
            update["user_memory_enabled"] = _SWITCH[args.user_memory]
        if args.agent_memory is not None:
            update["agent_memory_enabled"] = _SWITCH[args.agent_memory]
        new = current.model_copy(update=update)
        store.ingest.put_agent_settings(new)
    finally:
        store.close()
    print(json.dumps(_show(new), sort_keys=True) if args.json else _describe(new))
    return 0


def _get(args: argparse.Namespace) -> int:
    store = _store(create=False)
    try:
        current = store.ingest.get_agent_settings(args.agent_id)
    finally:
        store.close()
    print(json.dumps(_show(current), sort_keys=True) if args.json else _describe(current))
    return 0


def _describe(s) -> str:
    onoff = lambda v: "on" if v else "off"  # noqa: E731
    return (
        f"agent {s.agent_id}: name={s.name or '-'} user-memory={onoff(s.user_memory_enabled)} "
        f"agent-memory={onoff(s.agent_memory_enabled)}"
    )


def register(sub: argparse._SubParsersAction) -> None:
    agent = sub.add_parser("agent", help="show or change an agent's name and memory toggles")
    verbs = agent.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("set", help="register or change an agent's settings (unset fields keep their value)")
    p.add_argument("agent_id")
    p.add_argument("--name")
    p.add_argument("--user-memory", choices=sorted(_SWITCH))
    p.add_argument("--agent-memory", choices=sorted(_SWITCH))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_set)
    p = verbs.add_parser("show", help="an agent's settings (defaults for an unknown agent)")
    p.add_argument("agent_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_get)
