"""``memoryctl replay-rejected``: publish again the events whose ingest failed on an internal
(programming) error, once its cause is fixed (the use case is ``usecases.replay``)."""

from __future__ import annotations

import argparse
import json

from ops.commands import positive_int
from schemas.settings import get_settings
from usecases.replay import ReplayReport, replay_rejected


def _render(report: ReplayReport) -> str:
    lines = [f"replayed: {len(report.replayed)}   skipped: {len(report.skipped)}"]
    lines.extend(f"  {rid}: {why}" for rid, why in report.skipped)
    if report.error is not None:
        lines.append(f"stopped: {report.error} (the rest stay recorded; run it again)")
    return "\n".join(lines)


def _replay_rejected(args: argparse.Namespace) -> int:
    from ops.broker import publisher
    from ops.stores import open_existing

    settings = get_settings()
    store = open_existing(settings)
    try:
        report = replay_rejected(store, publisher(settings), ids=args.id, limit=args.limit)
    finally:
        store.close()
    if args.json:
        print(json.dumps({
            "replayed": report.replayed,
            "skipped": [{"rejection_id": rid, "reason": why} for rid, why in report.skipped],
            "error": str(report.error) if report.error is not None else None,
        }, sort_keys=True))
    else:
        print(_render(report))
    return 1 if report.error is not None or report.skipped else 0


def register(sub) -> None:
    p = sub.add_parser(
        "replay-rejected",
        help="publish again the events recorded after an internal error (not invalid ones)",
    )
    p.add_argument("--id", action="append", metavar="REJECTION_ID",
                   help="only this rejection (repeatable; ids from `memoryctl rejected --json`)")
    p.add_argument("--limit", type=positive_int, default=1000, help="how many of the newest records to look at (default 1000)")
    p.add_argument("--json", action="store_true", help="print {replayed, skipped, error}")
    p.set_defaults(func=_replay_rejected)
