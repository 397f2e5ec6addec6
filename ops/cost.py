"""``memoryctl cost``'s time bounds and its report as printed (the use case is
``usecases.cost``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from pipeline import cost

_SPAN = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_since(text: str) -> timedelta:
    """``7d``, ``12h`` or ``30m`` as a duration; ValueError naming the accepted forms."""
    match = _SPAN.match(text)
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"expected a duration such as 7d, 12h or 30m, got {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def parse_when(text: str) -> timedelta | datetime:
    """A time bound: a duration back from now (``7d``, ``12h``, ``30m``) or an ISO date or
    time (``2026-05-01``, ``2026-05-01T12:00:00+00:00``; UTC when no offset is given);
    ValueError naming the accepted forms."""
    try:
        return parse_since(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"expected a duration such as 7d, 12h or 30m, or an ISO date or time such as "
                         f"2026-05-01 or 2026-05-01T12:00:00+00:00, got {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def format_report(report: Mapping[str, Any]) -> str:
    since = f" since {report['since']}" if report["since"] else ""
    if report.get("until"):
        since += f" until {report['until']}"
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
