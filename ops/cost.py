"""``memoryctl cost``: what an agent's model calls cost, summed from the store (design §11).

Every formation run keeps its calls per stage and model, priced when they were recorded
(``pipeline.cost``); session-end consolidations, which have no run, and stage attempts that
failed after their calls keep theirs in usage records. Both are summed here, grouped by model, stage or day. A model without a price is
listed as unpriced beside the dollars, never counted as 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from pipeline import cost
from pipeline.store.port import Store

GROUPINGS = ("model", "stage", "day")
# every run of the agent is read: the port lists runs newest first under a limit
_ALL_RUNS = 10_000_000
_SPAN = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_since(text: str) -> timedelta:
    """``7d``, ``12h`` or ``30m`` as a duration; ValueError naming the accepted forms."""
    match = _SPAN.match(text)
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"expected a duration such as 7d, 12h or 30m, got {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _items(store: Store, agent_id: str, since: datetime | None) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(stage, day, priced per-model rows) of every recorded call of the agent since ``since``."""
    for run in store.list_runs(agent_id=agent_id, limit=_ALL_RUNS):
        if since is not None and run.created_at < since:
            continue
        for name, record in run.stages.items():
            if record.usage.by_model:
                at = record.finished_at or record.started_at or run.created_at
                yield name.split(":")[0], at.date().isoformat(), record.usage.by_model
    for record in store.list_usage(agent_id, since):
        yield record.stage.split(":")[0], record.at.date().isoformat(), record.by_model


def cost_report(store: Store, agent_id: str, *, since: datetime | None = None, by: str = "model") -> dict[str, Any]:
    """The agent's cost since ``since``: the total and one summary per model, stage or day."""
    if by not in GROUPINGS:
        raise ValueError(f"--by: expected one of {', '.join(GROUPINGS)}, got {by!r}")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    every: list[Mapping[str, Any]] = []
    for stage, day, rows in _items(store, agent_id, since):
        every.append(rows)
        if by == "model":
            for model, row in rows.items():
                groups.setdefault(model, []).append({model: row})
        else:
            groups.setdefault(stage if by == "stage" else day, []).append(rows)
    return {
        "agent_id": agent_id,
        "since": since.isoformat() if since else None,
        "by": by,
        "total": cost.summary(every),
        "groups": {key: cost.summary(rows) for key, rows in sorted(groups.items())},
    }


def format_report(report: Mapping[str, Any]) -> str:
    since = f" since {report['since']}" if report["since"] else ""
    lines = [f"agent {report['agent_id']}{since}: {cost.describe(report['total'])}"]
    for key, total in report["groups"].items():
        tokens_in = sum(r["input_tokens"] for r in total["by_model"].values())
        tokens_out = sum(r["output_tokens"] for r in total["by_model"].values())
        calls = sum(r["calls"] for r in total["by_model"].values())
        answered = f"  answered by {cost.answered_by(total)}" if cost.answered_by(total) else ""
        lines.append(f"  {key:<28} {cost.describe(total):<32} tokens in/out {tokens_in}/{tokens_out} ({calls} calls)"
                     + answered)
    if not report["groups"]:
        lines.append("  no model calls recorded")
    return "\n".join(lines)
