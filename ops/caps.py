"""Spend caps as ``memoryctl caps`` prints them (the use case is ``usecases.caps``)."""

from __future__ import annotations


def format_report(report: dict) -> str:
    """The report as lines for a terminal."""
    lines = [f"spend caps, UTC day {report['day']}, month {report['month']} ({report['note']})"]
    for row in [report["global"], *report["agents"]]:
        who = "global" if row["agent_id"] is None else f"agent {row['agent_id']}"
        lines.append(f"{who}: {row['state']} (caps from {row['source']})")
        for window in ("day", "month"):
            limits = row["caps"][window]
            shown = ", ".join(f"{k.removesuffix('_usd')} {v:.2f}" for k, v in limits.items() if v is not None)
            lines.append(f"  {window:<5} spent {row['spend_usd'][window]:.4f} USD; caps: {shown or 'none'}; "
                         f"unpriced calls: {row['unpriced_calls'][window]}")
    return "\n".join(lines)
