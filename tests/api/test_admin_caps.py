"""Spend caps over HTTP (``/v1/admin/caps``): set at run time, shown
against the priced spend of the day and month, unpriced calls counted apart, bad caps refused
with where and why."""

from __future__ import annotations

import json

import pytest

from schemas.documents import UsageRecord
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


@pytest.fixture
def admin(api):
    return {"Authorization": f"Bearer {api.keys['admin']}"}


def _spend(api, agent_id: str, usd: float | None, model: str, n: int) -> None:
    api.deps.store.stats.record_usage(UsageRecord(
        usage_id=f"u-{agent_id}-{model}-{n}", agent_id=agent_id, stage="consolidate_session", at=api.deps.clock.now(),
        by_model={model: {"kind": "llm", "provider": "openai", "calls": 2, "input_tokens": 10, "output_tokens": 5,
                          "usd": usd, "price": "priced" if usd is not None else "unpriced"}}))


def test_caps_set_over_http_are_shown_against_the_priced_spend(api, client, admin):
    _spend(api, "A", 4.5, "gpt-6-luna", 1)
    _spend(api, "A", None, "gpt-6.1-sol", 2)
    _spend(api, "B", 1.0, "gpt-6-luna", 3)
    put = client.put("/v1/admin/caps", headers=admin,
                     json={"agent_id": "A", "caps": {"day": {"soft_usd": 4, "hard_usd": 5}}})
    assert put.status_code == 200, put.text
    (row,) = put.json()["agents"]
    assert row["agent_id"] == "A" and row["source"] == "set" and row["state"] == "soft"
    assert row["spend_usd"] == {"day": 4.5, "month": 4.5} and row["unpriced_calls"] == {"day": 2, "month": 2}
    assert {(lv["kind"], lv["level"]) for lv in row["levels"]} == {("soft", 100), ("hard", 80)}
    client.put("/v1/admin/caps", headers=admin, json={"agent_id": None, "caps": {"month": {"hard_usd": 5}}})
    shown = client.get("/v1/admin/caps", headers=admin).json()
    assert shown["global"]["spend_usd"]["month"] == 5.5 and shown["global"]["state"] == "hard"
    assert [a["agent_id"] for a in shown["agents"]] == ["A"]
    assert "only priced spend counts" in shown["note"]
    audited = api.deps.store.access.list_audit(action="caps.set")
    assert sorted(e.subject for e in audited) == ["agent", "global"]


def test_removed_caps_fall_back_to_the_settings(api, client, admin):
    client.put("/v1/admin/caps", headers=admin, json={"agent_id": "A", "caps": {"day": {"hard_usd": 5}}})
    gone = client.put("/v1/admin/caps", headers=admin, json={"agent_id": "A", "caps": None}).json()
    assert gone["agents"][0]["source"] == "settings" and gone["agents"][0]["levels"] == []


@pytest.mark.parametrize("caps, where", [
    ({"day": {"soft_usd": 6, "hard_usd": 5}}, "caps.day"),
    ({"day": {"hard_usd": -1}}, "caps.day.hard_usd"),
    ({"week": {"hard_usd": 1}}, "caps.week"),
])
def test_bad_caps_are_refused_saying_where(client, admin, caps, where):
    response = client.put("/v1/admin/caps", headers=admin, json={"agent_id": "A", "caps": caps})
    assert response.status_code == 422
    assert where in json.dumps(response.json())
