"""``memoryctl forget-user``: delete everything of a user, under one agent or all agents."""

from __future__ import annotations

import argparse
import json

from schemas.settings import get_settings


def _run(args: argparse.Namespace) -> int:
    from ops.forget import forget_user, traces
    from ops.stores import open_existing

    store = open_existing(get_settings())
    try:
        counts = forget_user(store, args.user, None if args.all_agents else args.agent, settings=get_settings())
        left = traces(store.dump_all(), args.user, None if args.all_agents else args.agent) if args.verify else None
    finally:
        store.close()
    scope = "every agent" if args.all_agents else f"agent {args.agent}"
    if args.json:
        print(json.dumps({"user": args.user, "scope": scope, "deleted": counts, "traces": left}, sort_keys=True))
    else:
        print(f"forgot user {args.user} under {scope}:")
        for name, count in sorted(counts.items()):
            print(f"  {name:<22} {count:>8}")
        if left is not None:
            print(f"  traces left: {len(left)}" + (f" ({', '.join(left[:10])})" if left else ""))
    return 1 if left else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forget-user", help="delete everything of a user (facts, reflections, blobs, messages, runs, caches), and every "
             "item in any scope formed from their messages; blobs that absorbed one are rebuilt",
    )
    p.add_argument("--user", required=True, help="the user's id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--agent", help="erase under this agent only")
    where.add_argument("--all-agents", action="store_true", help="erase under every agent")
    p.add_argument("--verify", action="store_true", help="then check every id field of every collection for the user, and every item's sources "
                        "(exit 1 if one names them, or a blob still counts a removed reflection)")
    p.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    p.set_defaults(func=_run)
