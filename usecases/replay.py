"""Publishing again the events whose ingest failed on an internal (programming) error, once its
cause is fixed (``memoryctl replay-rejected``).

Such events are kept in the rejected-events record with their raw payload and the field
``<internal>`` (``pipeline.rejections.record_failure``). Each one is published as it was received
and its record is dropped only once the broker holds it, so a broker outage half way loses
nothing: what was not published stays listed. Invalid events are never replayed (publishing
them again would only reject them again). Ingest is idempotent, so an event that was in fact
stored comes back as a duplicate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import TransientError
from pipeline.rejections import INTERNAL_FIELD
from pipeline.store.port import Store
from schemas.documents import RejectedEvent


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
