"""Usage records (model calls outside any run), on every adapter."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schemas.documents import UsageRecord

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def _record(usage_id, agent_id, at, model="gpt-6.1-sol"):
    return UsageRecord(usage_id=usage_id, agent_id=agent_id, session_id="s-1", stage="consolidate_session", at=at,
                       by_model={model: {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 10,
                                         "output_tokens": 5, "usd": None, "price": "unpriced"}})


def test_usage_records_are_kept_per_agent_and_listed_since_a_time(store):
    store.stats.record_usage(_record("u1", "agent-1", T0))
    store.stats.record_usage(_record("u2", "agent-1", T0 + timedelta(days=2), model="gemini-3.8-flash"))
    store.stats.record_usage(_record("u3", "agent-2", T0))
    assert [r.usage_id for r in store.stats.list_usage("agent-1")] == ["u1", "u2"]
    later = store.stats.list_usage("agent-1", since=T0 + timedelta(days=1))
    # a model name with dots survives the round trip (Mongo field names may not hold dots)
    assert [r.usage_id for r in later] == ["u2"] and list(later[0].by_model) == ["gemini-3.8-flash"]


def test_recording_a_usage_record_again_keeps_one(store):
    store.stats.record_usage(_record("u1", "agent-1", T0))
    store.stats.record_usage(_record("u1", "agent-1", T0))
    assert len(store.stats.list_usage("agent-1")) == 1
