"""``memoryctl cost``: an agent's model cost from the store.

    memoryctl cost --agent a1 [--since 7d|2026-05-01] [--until 1d|2026-06-01] [--by model|stage|day] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from schemas.settings import get_settings


def time_bound(text: str):
    """argparse type of ``--since``/``--until``: a duration (``7d``) or an ISO date or time."""
    from ops.cost import parse_when

    try:
        return parse_when(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def bound_at(when, now):
    """A bound as a time: a duration counts back from ``now``."""
    if when is None or isinstance(when, datetime):
        return when
    return now - when


def _cost(args: argparse.Namespace) -> int:
    from ops.cost import format_report
    from usecases.cost import cost_report
    from ops.stores import open_existing
    from pipeline.clock import Clock

    from ops.commands.runs import warn_of_model_shutdowns

    warn_of_model_shutdowns()
    now = Clock().now()
    since, until = bound_at(args.since, now), bound_at(args.until, now)
    if since is not None and until is not None and until <= since:
        print(f"memoryctl cost: --until ({until.isoformat()}) must come after --since ({since.isoformat()})",
              file=sys.stderr)
        return 2
    store = open_existing(get_settings())
    try:
        report = cost_report(store, args.agent, since=since, until=until, by=args.by)
    finally:
        store.close()
    print(json.dumps(report, sort_keys=True) if args.json else format_report(report))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="sum an agent's model cost (USD) by model, stage or day")
    p.add_argument("--agent", required=True)
    p.add_argument("--since", type=time_bound,
                   help="from 7d, 12h, 30m ago, or from an ISO date or time (default: everything)")
    p.add_argument("--until", type=time_bound,
                   help="before 1d, 12h, 30m ago, or before an ISO date or time (default: now)")
    p.add_argument("--by", choices=["model", "stage", "day"], default="model")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cost)
