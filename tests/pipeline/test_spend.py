"""The spend-cap decision (``pipeline.spend``): table-driven over caps and spend."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pipeline import spend
from schemas.caps import SpendCaps, WindowCaps

CAPS = SpendCaps(day=WindowCaps(soft_usd=4, hard_usd=5), month=WindowCaps(soft_usd=80, hard_usd=100))


@pytest.mark.parametrize("day, month, expected", [
    (0.0, 0.0, "ok"),
    (3.99, 50.0, "ok"),
    (4.0, 50.0, "soft"),          # a cap is reached at its figure
    (4.5, 85.0, "soft"),
    (5.0, 50.0, "hard"),
    (1.0, 100.0, "hard"),         # the month's cap holds whatever the day spent
])
def test_verdict_follows_the_highest_cap_reached(day, month, expected):
    assert spend.verdict(spend.states("agent", CAPS, {"day": day, "month": month})) == expected


def test_no_caps_is_always_ok_and_a_zero_cap_is_reached_at_once():
    assert spend.verdict(spend.states("agent", SpendCaps(), {"day": 1e9, "month": 1e9})) == "ok"
    zero = SpendCaps(day=WindowCaps(hard_usd=0))
    assert spend.verdict(spend.states("global", zero, {})) == "hard"


@pytest.mark.parametrize("spent, level", [(3.99, 0), (4.0, 80), (4.99, 80), (5.0, 100), (7.0, 100)])
def test_levels_are_80_percent_and_the_cap(spent, level):
    (state,) = spend.states("agent", SpendCaps(day=WindowCaps(hard_usd=5)), {"day": spent})
    assert state.level == level


@pytest.mark.parametrize("now, window, days, name", [
    (datetime(2026, 3, 31, 23, 0, tzinfo=timezone.utc), "day", ("2026-03-31", "2026-04-01"), "2026-03-31"),
    (datetime(2026, 3, 31, 23, 0, tzinfo=timezone.utc), "month", ("2026-03-01", "2026-04-01"), "2026-03"),
    (datetime(2026, 12, 5, 0, 0, tzinfo=timezone.utc), "month", ("2026-12-01", "2027-01-01"), "2026-12"),
])
def test_windows_are_utc_days_and_months(now, window, days, name):
    assert spend.window_days(window, now) == days
    assert spend.window_name(window, now) == name


def test_a_deferral_lasts_until_the_reached_window_rolls():
    now = datetime(2026, 3, 31, 23, 0, tzinfo=timezone.utc)
    found = spend.states("agent", CAPS, {"day": 5.0, "month": 10.0})
    assert spend.deferral_s(found, now) == 3600
    assert spend.deferral_s(spend.states("agent", CAPS, {"day": 4.5}), now) == 0
