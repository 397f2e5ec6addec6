"""``memoryctl forget-user``: delete everything of a user, under one agent or all agents, and
with ``--verify`` check that nothing attributed to them is left (``usecases.erase``)."""

from __future__ import annotations

import argparse
import json
import sys

from schemas.settings import get_settings


def _progress(args: argparse.Namespace):
    """Step lines on a terminal's stderr; nothing under ``--json`` or when piped."""
    if args.json or not sys.stderr.isatty():
        return None
    return lambda line: print(f"forget-user: {line}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from ops.stores import open_existing
    from usecases.erase import forget_user

    agent = None if args.all_agents else args.agent
    args.verify = args.verify or args.strict
    store = open_existing(get_settings())
    try:
        result = forget_user(store, args.user, agent, settings=get_settings(), progress=_progress(args),
                             check=args.verify)
    finally:
        store.close()
    scope = "every agent" if args.all_agents else f"agent {args.agent}"
    check, left, unattributed = result.check, result.traces, result.unattributed
    if args.json:
        print(json.dumps({"user": args.user, "scope": scope, "deleted": result.counts, "traces": left,
                          "unattributed": unattributed}, sort_keys=True))
    else:
        print(f"forgot user {args.user} under {scope}:")
        for name, count in sorted(result.counts.items()):
            print(f"  {name:<22} {count:>8}")
        if check is not None:
            print(f"  traces left: {len(left)}" + (f" ({', '.join(left[:10])})" if left else ""))
        if unattributed:
            print(f"  unattributed (no source recorded; kept{', fails --strict' if args.strict else ''}): "
                  f"{len(unattributed)} ({', '.join(unattributed[:10])})")
    return 0 if check is None or check.passed(strict=args.strict) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forget-user", help="delete everything of a user (facts, reflections, blobs, messages, runs, caches), and every "
             "item in any scope formed from their messages; blobs that absorbed one are rebuilt",
    )
    p.add_argument("--user", required=True, help="the user's id")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--agent", help="erase under this agent only")
    where.add_argument("--all-agents", action="store_true", help="erase under every agent")
    p.add_argument("--verify", action="store_true",
                   help="then check, through the provenance indexes, that no id field names the user and no item rests "
                        "on them (exit 1 if one does); items with no attribution at all are listed apart")
    p.add_argument("--strict", action="store_true",
                   help="verify, and also exit 1 while items or blob text with no attribution at all remain")
    p.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    p.set_defaults(func=_run)
