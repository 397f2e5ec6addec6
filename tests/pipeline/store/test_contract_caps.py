"""The spend-caps port (``pipeline.store.ports.caps``) on every adapter: caps set per agent
and globally at run time, replaced, removed, and read back as set."""

from __future__ import annotations

from datetime import datetime, timezone

from schemas.caps import GLOBAL, SpendCaps, WindowCaps

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_caps_set_per_agent_and_globally_are_read_back(store):
    daily = SpendCaps(day=WindowCaps(soft_usd=4, hard_usd=5))
    monthly = SpendCaps(month=WindowCaps(hard_usd=100.5))
    store.caps.put_spend_caps("agent-1", daily, T0)
    store.caps.put_spend_caps(GLOBAL, monthly, T0)
    assert store.caps.get_spend_caps("agent-1") == daily
    assert store.caps.get_spend_caps(GLOBAL) == monthly
    assert store.caps.get_spend_caps("agent-2") is None
    assert store.caps.list_spend_caps() == {GLOBAL: monthly, "agent-1": daily}


def test_caps_set_again_replace_and_none_removes_them(store):
    store.caps.put_spend_caps("agent-1", SpendCaps(day=WindowCaps(soft_usd=4, hard_usd=5)), T0)
    replaced = SpendCaps(month=WindowCaps(soft_usd=1))
    store.caps.put_spend_caps("agent-1", replaced, T0)
    assert store.caps.get_spend_caps("agent-1") == replaced
    store.caps.put_spend_caps("agent-1", None, T0)
    store.caps.put_spend_caps("agent-9", None, T0)   # removing what is not there is no error
    assert store.caps.get_spend_caps("agent-1") is None
    assert store.caps.list_spend_caps() == {}
