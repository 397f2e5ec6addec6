"""``memoryctl cost``: an agent's model cost from the store.

    memoryctl cost --agent a1 [--since 7d] [--by model|stage|day] [--json]
"""

from __future__ import annotations

import argparse
import json

from schemas.settings import get_settings


def _since(text: str):
    from ops.cost import parse_since

    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cost(args: argparse.Namespace) -> int:
    from ops.cost import cost_report, format_report
    from ops.stores import open_existing
    from pipeline.clock import Clock

    from ops.commands.runs import warn_of_model_shutdowns

    warn_of_model_shutdowns()
    since = Clock().now() - args.since if args.since is not None else None
    store = open_existing(get_settings())
    try:
        report = cost_report(store, args.agent, since=since, by=args.by)
    finally:
        store.close()
    print(json.dumps(report, sort_keys=True) if args.json else format_report(report))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="sum an agent's model cost (USD) by model, stage or day")
    p.add_argument("--agent", required=True)
    p.add_argument("--since", type=_since, help="only the last 7d, 12h, 30m, ... (default: everything)")
    p.add_argument("--by", choices=["model", "stage", "day"], default="model")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cost)
