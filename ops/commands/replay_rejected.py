"""``memoryctl replay-rejected``: publish again the events whose ingest failed on an internal
(programming) error, once its cause is fixed.

Such events are kept in the rejected-events record with their raw payload and the field
``<internal>`` (``pipeline.rejections.record_failure``). Each one is published as it was received
and its record is dropped only once the broker holds it, so a broker outage half way loses
nothing: what was not published stays listed. Invalid events are never replayed (publishing
them again would only reject them again). Ingest is idempotent, so an event that was in fact
stored comes back as a duplicate.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

from ops.commands import positive_int
from pipeline.errors import TransientError
from pipeline.rejections import INTERNAL_FIELD
from pipeline.store.port import Store
from schemas.documents import RejectedEvent
from schemas.settings import get_settings


def is_internal(rejected: RejectedEvent) -> bool:
    return any(e.get("field") == INTERNAL_FIELD for e in rejected.errors)


def payload(rejected: RejectedEvent) -> Any:
    """The event as received: the JSON object when the raw text is one, else the text."""
    try:
        value = json.loads(rejected.raw)
    except ValueError:
        return rejected.raw
    return value if isinstance(value, dict) else rejected.raw


@dataclass
class ReplayReport:
    replayed: list[str] = field(default_factory=list)  # rejection ids
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (rejection id, why)
    error: TransientError | None = None

    def render(self) -> str:
        lines = [f"replayed: {len(self.replayed)}   skipped: {len(self.skipped)}"]
        lines.extend(f"  {rid}: {why}" for rid, why in self.skipped)
        if self.error is not None:
            lines.append(f"stopped: {self.error} (the rest stay recorded; run it again)")
        return "\n".join(lines)


def replay_rejected(store: Store, publisher, *, ids: list[str] | None = None, limit: int = 1000) -> ReplayReport:
    """Publish the internal-error rejections (all of those among the newest ``limit`` records,
    or those of ``ids``), oldest first, dropping each record once the broker holds its event."""
    report = ReplayReport()
    listed = {r.rejection_id: r for r in store.ingest.list_rejections(limit=limit)}
    if ids:
        chosen = []
        for rid in ids:
            found = listed.get(rid)
            if found is None:
                report.skipped.append((rid, f"not among the newest {limit} rejections"))
            elif not is_internal(found):
                report.skipped.append((rid, "an invalid event, not an internal error: replaying it would reject it again"))
            else:
                chosen.append(found)
    else:
        chosen = [r for r in listed.values() if is_internal(r)]
    for rejected in sorted(chosen, key=lambda r: r.received_at):
        try:
            publisher.publish_one(payload(rejected))
        except TransientError as exc:
            report.error = exc
            break
        store.ingest.delete_rejections([rejected.rejection_id])
        report.replayed.append(rejected.rejection_id)
    return report


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
        print(report.render())
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
