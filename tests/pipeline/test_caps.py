"""Spend caps read from the store (``pipeline.caps``) on every adapter: the caps that apply
(set at run time, else the settings'), the priced spend of the day and month from the roll-ups
(unpriced calls apart, other days and agents left out), and each level announced once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pipeline import caps
from schemas.caps import CapsSetting, SpendCaps, WindowCaps
from schemas.documents import UsageRecord
from schemas.settings import Settings

from tests.pipeline.store.conftest import store  # noqa: F401  (the `store` fixture: every adapter)

NOW = datetime(2026, 3, 15, 12, 0, tzinfo=timezone.utc)


def _spend(store, agent_id, at, usd, n, model="gpt-6-luna"):
    store.stats.record_usage(UsageRecord(
        usage_id=f"u{n}", agent_id=agent_id, stage="consolidate_session", at=at,
        by_model={model: {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 1, "output_tokens": 1,
                          "usd": usd, "price": "priced" if usd is not None else "unpriced"}}))


def _settings(**caps_setting) -> Settings:
    return Settings(_env_file=None, spend_caps=CapsSetting.model_validate(caps_setting))


def test_spend_is_the_priced_usage_of_the_utc_day_and_month(store):
    _spend(store, "a1", NOW, 2.0, 1)
    _spend(store, "a1", NOW - timedelta(days=3), 1.5, 2)          # this month, not today
    _spend(store, "a1", NOW - timedelta(days=20), 9.0, 3)         # last month
    _spend(store, "a1", NOW, None, 4, model="gpt-6.1-sol")        # unpriced: counted apart
    _spend(store, "a2", NOW, 7.0, 5)                              # another agent
    mine = caps.spend_of(store.rollups, "a1", NOW)
    assert mine.usd == {"day": 2.0, "month": 3.5} and mine.unpriced_calls == {"day": 1, "month": 1}
    assert caps.spend_of(store.rollups, None, NOW).usd == {"day": 9.0, "month": 10.5}


def test_caps_set_at_run_time_replace_the_settings_default(store):
    settings = _settings(agent={"day": {"hard_usd": 5}}, **{"global": {"month": {"soft_usd": 50}}})
    assert caps.caps_of(store.caps, settings, "a1") == SpendCaps(day=WindowCaps(hard_usd=5))
    assert caps.caps_of(store.caps, settings, None) == SpendCaps(month=WindowCaps(soft_usd=50))
    store.caps.put_spend_caps("a1", SpendCaps(month=WindowCaps(hard_usd=1)), NOW)
    assert caps.caps_of(store.caps, settings, "a1") == SpendCaps(month=WindowCaps(hard_usd=1))
    assert caps.caps_of(store.caps, settings, "a2") == SpendCaps(day=WindowCaps(hard_usd=5))


def test_a_global_cap_holds_every_agent_and_each_level_is_announced_once(store):
    settings = _settings(**{"global": {"day": {"hard_usd": 10}}})
    _spend(store, "a1", NOW, 8.5, 1)
    assert caps.check(store, settings, "a2", NOW).verdict == "ok"    # 85%: announced at 80
    _spend(store, "a2", NOW, 2.0, 2)
    for _ in range(3):
        assert caps.check(store, settings, "a2", NOW).verdict == "hard"
    entries = store.access.list_audit(action="cap.reached")
    assert sorted((e.agent_id, e.subject, e.counts["level"]) for e in entries) == [
        ("a2", "global:day", 80), ("a2", "global:day", 100)]
    assert caps.check(store, settings, "a2", NOW + timedelta(days=1)).verdict == "ok"   # a new day
