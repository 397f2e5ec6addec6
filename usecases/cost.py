"""What an agent's model calls cost, summed from the store (design §11): ``memoryctl cost``,
``/v1/admin/cost`` and the inspector's Cost page.

Every formation run keeps its calls per stage and model, priced when they were recorded
(``pipeline.cost``); session-end consolidations, which have no run, and stage attempts that
failed after their calls keep theirs in usage records. The store sums both per stage, day and
model: whole days from the usage roll-ups (``Store.rollup_rows``), a window that cuts a day
over the runs its index on agent and time selects (``Store.cost_rows``); they are grouped here
by model, stage or day. A model without a price is listed as unpriced beside the
dollars, never counted as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from pipeline import cost
from pipeline.store.port import Store
from pipeline.store.ports.rollups import day_of

GROUPINGS = ("model", "stage", "day")


def cost_report(store: Store, agent_id: str, *, since: datetime | None = None, until: datetime | None = None,
                by: str = "model") -> dict[str, Any]:
    """The agent's cost in ``[since, until)``: the total and one summary per model, stage or
    day. The store sums the calls per stage, day and model (``_rows``: the roll-ups of whole
    days, else the runs created in the window and the usage records made in it)."""
    if by not in GROUPINGS:
        raise ValueError(f"--by: expected one of {', '.join(GROUPINGS)}, got {by!r}")
    if since is not None and until is not None and until <= since:
        raise ValueError(f"--until ({until.isoformat()}) must come after --since ({since.isoformat()})")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    every: list[Mapping[str, Any]] = []
    for row in _rows(store, agent_id, since, until):
        rows = row.by_model()
        every.append(rows)
        key = {"model": row.model, "stage": row.stage, "day": row.day}[by]
        groups.setdefault(key, []).append(rows)
    return {
        "agent_id": agent_id,
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "by": by,
        "total": cost.summary(every),
        "groups": {key: cost.summary(rows) for key, rows in sorted(groups.items())},
    }


def _whole_day(at: datetime | None) -> bool:
    return at is None or at.astimezone(timezone.utc).time() == datetime.min.time()


def _rows(store: Store, agent_id: str, since: datetime | None, until: datetime | None):
    """Whole UTC days (or no bound) are read from the daily usage roll-ups, a few rows a day;
    a window that cuts a day sums the stages of the runs created in it (``cost_rows``)."""
    if _whole_day(since) and _whole_day(until):
        return store.rollups.rollup_rows(agent_id, since_day=since and day_of(since), until_day=until and day_of(until))
    return store.stats.cost_rows(agent_id, since=since, until=until)
