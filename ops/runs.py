"""Runs as ``memoryctl runs`` prints them (the use cases are ``usecases.runs``)."""

from __future__ import annotations

from typing import Any

from pipeline import cost
from pipeline.formation.finish import SCREENING_COUNTERS


def format_run(summary: dict[str, Any]) -> str:
    """One line per run, then one indented line per stage."""
    tokens = summary["tokens"]
    head = (
        f"{summary['run_id']}  {summary['status']:<8} {summary['reason']:<11} "
        f"agent={summary['agent_id']} session={summary['session_id']} "
        f"seq={summary['seq'][0]}-{summary['seq'][1]} attempts={summary['attempts']} "
        f"{summary['total_ms']:.0f} ms  tokens in/out {tokens['input']}/{tokens['output']} ({tokens['calls']} calls)"
        f"  cost {cost.describe(summary['cost'])}"
    )
    lines = [head]
    if answered := cost.answered_by(summary["cost"]):
        lines.append(f"    answered by: {answered}")
    kept_out = {c: summary.get(c, 0) for c in SCREENING_COUNTERS}
    if any(kept_out.values()):
        lines.append("    never stored: " + ", ".join(f"{c}={n}" for c, n in kept_out.items()))
    for name, stage in summary["stages"].items():
        ms = "-" if stage["ms"] is None else f"{stage['ms']:.1f} ms"
        error = f"  error: {stage['error']}" if stage.get("error") else ""
        lines.append(f"    {name:<20} {stage['status']:<8} {ms:>10}{error}")
    if summary["error"]:
        lines.append(f"    error: {summary['error']}")
    if summary.get("unreadable"):
        lines.append(f"    unreadable: {summary['unreadable']}")
    if summary.get("trace_id"):
        lines.append(f"    trace: {summary['trace_id']}")
    return "\n".join(lines)
