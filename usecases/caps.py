"""Spend caps as operators see and set them (``memoryctl caps``, ``/v1/admin/caps``, the
inspector's Cost page): each owner's caps against its spend so far this UTC day and month.

Only priced spend counts towards a cap (``pipeline.spend``); each row says how many calls of the
window had no price, so spend on an unpriced model is not invisible."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipeline import caps, spend
from pipeline.caps import CapsStore
from schemas.caps import GLOBAL, SpendCaps
from schemas.settings import Settings
from usecases.audit import Audited

NOTE = "only priced spend counts towards a cap: calls of a model with no price are counted in unpriced_calls"


def _row(store: CapsStore, settings: Settings, agent_id: str | None, now: datetime) -> dict:
    owner = GLOBAL if agent_id is None else agent_id
    applied = caps.caps_of(store.caps, settings, agent_id)
    spent = caps.spend_of(store.rollups, agent_id, now)
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


@dataclass(frozen=True)
class CapsSet:
    agent_id: str | None
    caps: SpendCaps | None

    @property
    def audit(self) -> Audited:
        return Audited("caps.set", self.agent_id, "global" if self.agent_id is None else "agent")


def set_caps(store: CapsStore, agent_id: str | None, new: SpendCaps | None, now: datetime) -> CapsSet:
    """Set (None: remove) the agent's caps, or the global ones (``agent_id`` None)."""
    store.caps.put_spend_caps(GLOBAL if agent_id is None else agent_id, new, now)
    return CapsSet(agent_id, new)
