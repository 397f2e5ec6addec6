"""Spend caps, the decision (design §13 "Operator controls"): given an agent's caps, the global
caps and the spend so far in the current UTC day and month, is formation ``ok``, at a ``soft``
cap (premium stages move to the fast tier) or at a ``hard`` cap (formation waits)?

Pure: the spend comes in as numbers (``pipeline.caps`` reads it from the usage roll-ups). Only
priced spend counts: a model with no price has no USD figure, so its calls count nothing
towards a cap (``memoryctl caps show`` says how many such calls the window holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from schemas.caps import WINDOWS, SpendCaps

OK, SOFT, HARD = "ok", "soft", "hard"
#: the share of a cap announced before it is reached
WARN_SHARE = 0.8


@dataclass(frozen=True)
class CapState:
    """One cap against its spend: ``scope`` agent | global, ``window`` day | month, ``kind``
    soft | hard."""

    scope: str
    window: str
    kind: str
    cap_usd: float
    spend_usd: float

    @property
    def level(self) -> int:
        """100: reached; 80: at 80% or more of it; 0: below."""
        if self.spend_usd >= self.cap_usd:
            return 100
        return 80 if self.spend_usd >= WARN_SHARE * self.cap_usd else 0


def _utc(now: datetime) -> datetime:
    return (now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now).astimezone(timezone.utc)


def window_days(window: str, now: datetime) -> tuple[str, str]:
    """The UTC days ``[first, end)`` of the window holding ``now``, as roll-up days (ISO)."""
    today = _utc(now).date()
    if window == "day":
        return today.isoformat(), (today + timedelta(days=1)).isoformat()
    first = today.replace(day=1)
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return first.isoformat(), following.isoformat()


def window_name(window: str, now: datetime) -> str:
    """The window's name: ``2026-03-01`` for a day, ``2026-03`` for a month."""
    first, _ = window_days(window, now)
    return first if window == "day" else first[:7]


def seconds_to_roll(window: str, now: datetime) -> float:
    """Seconds until the window holding ``now`` ends."""
    _, end = window_days(window, now)
    return (datetime.fromisoformat(end).replace(tzinfo=timezone.utc) - _utc(now)).total_seconds()


def states(scope: str, caps: SpendCaps, spend: Mapping[str, float]) -> list[CapState]:
    """Each cap ``caps`` sets, against ``spend`` (window -> priced USD so far)."""
    out = []
    for window in WINDOWS:
        limits = caps.window(window)
        for kind, cap in (("soft", limits.soft_usd), ("hard", limits.hard_usd)):
            if cap is not None:
                out.append(CapState(scope, window, kind, cap, round(spend.get(window, 0.0), 9)))
    return out


def verdict(found: Iterable[CapState]) -> str:
    """``hard`` when any hard cap is reached, else ``soft`` when any soft cap is, else ``ok``."""
    reached = {s.kind for s in found if s.level == 100}
    return HARD if "hard" in reached else SOFT if "soft" in reached else OK


def deferral_s(found: Iterable[CapState], now: datetime) -> float:
    """How long until the earliest reached hard cap's window rolls (0: none reached)."""
    waits = [seconds_to_roll(s.window, now) for s in found if s.kind == "hard" and s.level == 100]
    return min(waits, default=0.0)
