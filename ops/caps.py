"""Spend caps as operators see and set them (``memoryctl caps``, ``/v1/admin/caps``, the
inspector's Cost page): each owner's caps against its spend so far this UTC day and month.

Only priced spend counts towards a cap (``pipeline.spend``); each row says how many calls of the
window had no price, so spend on an unpriced model is not invisible."""

from __future__ import annotations

from datetime import datetime

from pipeline import caps, spend
from pipeline.caps import CapsStore
from schemas.caps import GLOBAL, SpendCaps
from schemas.settings import Settings

NOTE = "only priced spend counts towards a cap: calls of a model with no price are counted in unpriced_calls"


def _row(store: CapsStore, settings: Settings, agent_id: str | None, now: datetime) -> dict:
    owner = GLOBAL if agent_id is None else agent_id
    applied = caps.caps_of(store, settings, agent_id)
    spent = caps.spend_of(store, agent_id, now)
    states = spend.states("global" if agent_id is None else "agent", applied, spent.usd)
    return {
        "agent_id": agent_id, "caps": applied.model_dump(),
        "source": "set" if store.caps.get_spend_caps(owner) is not None else "settings",
        "spend_usd": {w: round(v, 6) for w, v in spent.usd.items()}, "unpriced_calls": spent.unpriced_calls,
        "state": spend.verdict(states),
        "levels": [{"window": s.window, "kind": s.kind, "cap_usd": s.cap_usd, "level": s.level} for s in states],
    }


def caps_report(store: CapsStore, settings: Settings, now: datetime, agent_id: str | None = None) -> dict:
    """The global caps and spend, then the agent's (``agent_id``), or else every agent's whose
    caps were set at run time."""
    agents = [agent_id] if agent_id is not None else sorted(o for o in store.caps.list_spend_caps() if o != GLOBAL)
    return {
        "day": spend.window_name("day", now), "month": spend.window_name("month", now), "note": NOTE,
        "agent_default": settings.spend_caps.agent.model_dump(),
        "global": _row(store, settings, None, now),
        "agents": [_row(store, settings, a, now) for a in agents],
    }


def set_caps(store: CapsStore, agent_id: str | None, new: SpendCaps | None, now: datetime) -> None:
    """Set (None: remove) the agent's caps, or the global ones (``agent_id`` None)."""
    store.caps.put_spend_caps(GLOBAL if agent_id is None else agent_id, new, now)


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
