"""Shared provider rate limits (design §8): the GCRA decision, the Lua script that applies it
on a real redis-server, and two processes sharing one limit through it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import RateLimited, Throttled
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from pipeline.llm.rates import SPACING, LocalRates, RateLimit, RateLimitedLLM, gcra, limit_for
from pipeline.llm.rates_redis import RedisRates
from pipeline.prompts.facts import FactsAnswer
from testkit.procs import RedisServer, require_redis_server

REPO = Path(__file__).resolve().parents[3]
REQUEST = LLMRequest(operation="extract_facts", model="m1", system="s" * 40, prompt="p" * 360,
                     response_model=FactsAnswer, timeout_s=5.0)


@pytest.mark.parametrize("tat,now,interval,cost,expected", [
    (None, 1000.0, 500.0, 1, (0.0, 1500.0)),      # first call: goes, the next turn is an interval on
    (1500.0, 1000.0, 500.0, 1, (500.0, 1500.0)),  # too early: waits, takes nothing
    (800.0, 1000.0, 500.0, 1, (0.0, 1500.0)),     # idle since: counted from now, no saved-up burst
    (1000.0, 1000.0, 6.0, 100, (0.0, 1600.0)),    # tokens: an interval per token
])
def test_gcra_lets_a_call_go_only_at_its_turn(tat, now, interval, cost, expected):
    assert gcra(tat, now, interval, cost) == expected


def test_a_model_s_own_limit_wins_over_its_provider_s():
    limits = {"openai": RateLimit(rpm=10), "openai:gpt-x": RateLimit(rpm=3)}
    assert limit_for(limits, "openai", "gpt-x") == RateLimit(rpm=3)
    assert limit_for(limits, "openai", "gpt-y") == RateLimit(rpm=10)
    assert limit_for(limits, "gemini", "g") is None


class _Provider(LLM):
    provider = "fake"

    def __init__(self, fail_429: float | None = None) -> None:
        self.calls, self.fail_429 = 0, fail_429

    def complete(self, request):
        self.calls += 1
        if self.fail_429 is not None:
            raise RateLimited("HTTP 429", retry_after=self.fail_429)
        return LLMResponse(parsed=FactsAnswer(facts=[]), model=request.model, provider=self.provider,
                           input_tokens=100, output_tokens=20)


def test_a_call_past_its_inline_wait_is_throttled_with_the_wait_and_never_reaches_the_provider():
    provider = _Provider()
    llm = RateLimitedLLM(provider, LocalRates(), {"fake": RateLimit(rpm=2)}, wait_inline_s=0.0)
    llm.complete(REQUEST)
    with pytest.raises(Throttled) as caught:
        llm.complete(REQUEST)
    assert 29 < caught.value.retry_after <= 30 * SPACING and provider.calls == 1


def test_a_429_holds_every_caller_off_for_its_retry_after():
    rates = LocalRates()
    limits = {"fake": RateLimit(rpm=6000)}
    with pytest.raises(RateLimited):
        RateLimitedLLM(_Provider(fail_429=20.0), rates, limits, wait_inline_s=0.0).complete(REQUEST)
    other = _Provider()
    with pytest.raises(Throttled) as caught:  # another caller of the same limit
        RateLimitedLLM(other, rates, limits, wait_inline_s=0.0).complete(REQUEST)
    assert 19 < caught.value.retry_after <= 20 and other.calls == 0


# ------------------------------------------------------------------ the Lua script on Redis ---
@pytest.fixture(scope="module")
def redis(tmp_path_factory):
    require_redis_server()
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def shared(redis):
    client = redis.client()
    client.flushdb()
    return client, RedisRates(client, "t_")


def test_the_script_refuses_a_second_request_within_the_interval_and_touches_only_its_keys(shared):
    client, rates = shared
    limit = RateLimit(rpm=60, tpm=600)
    assert rates.take("fake:m1", limit, 100) == 0
    wait = rates.take("fake:m1", limit, 100)
    assert 9.5 < wait <= 10 * SPACING  # the tokens' turn: 100 tokens at 600 a minute is 10 s
    assert {k.decode() for k in client.keys("*")} == {"t_llm_rate:fake:m1:req", "t_llm_rate:fake:m1:tok",
                                                       "t_llm_rate:counters"}
    assert all(client.pttl(k) > 0 for k in ("t_llm_rate:fake:m1:req", "t_llm_rate:fake:m1:tok"))
    assert rates.status(["fake:m1"])["fake:m1"]["deferred"] == 1


def test_the_script_and_the_in_process_rule_decide_alike(shared):
    _, rates = shared
    local = LocalRates()
    limit = RateLimit(rpm=30)
    for where in (rates, local):
        assert where.take("k", limit, 1) == 0
        assert 1.9 < where.take("k", limit, 1) <= 2.0 * SPACING
        where.hold("k", limit, 7.0)
        assert 6.9 < where.take("k", limit, 1) <= 7.0
        where.debit("k", RateLimit(tpm=60), 30)  # 30 tokens at 60 a minute: 30 s more
        assert 29 < where.take("k", RateLimit(tpm=60), 1) <= 37 * SPACING


_TAKER = """
import json, sys, time
import redis
from pipeline.llm.rates import RateLimit
from pipeline.llm.rates_redis import RedisRates
rates = RedisRates(redis.Redis.from_url(sys.argv[1]), "t_")
limit, grants, end = RateLimit(rpm=240), [], time.monotonic() + 3.0
while time.monotonic() < end:
    wait = rates.take("fake:shared", limit, 1)
    if wait == 0:
        grants.append(float("%d.%06d" % tuple(rates.redis.time())))
    else:
        time.sleep(min(wait, 0.05) / 3)
print(json.dumps(grants))
"""


def test_two_processes_share_one_limit(shared, redis):
    procs = [subprocess.Popen([sys.executable, "-c", _TAKER, redis.url()], stdout=subprocess.PIPE, text=True,
                              cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}) for _ in range(2)]
    grants = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(grants)  # both got turns
    times = sorted(t for g in grants for t in g)
    # 240 a minute is one every 0.25 s (and a little), whoever asks: never two turns closer
    # (less what a loaded machine may put between a grant and the reading of its time)
    assert min(b - a for a, b in zip(times, times[1:])) >= 0.2


def test_memoryctl_status_shows_what_a_shared_limit_holds_back(shared, redis, tmp_path, monkeypatch, capsys):
    from ops.cli import main
    from schemas.settings import get_settings

    from pipeline.store.sqlite import SQLiteStore

    client, _ = shared
    made = SQLiteStore(str(tmp_path / "memory.db"), prefix="t_")
    made.create_indexes()
    made.close()
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    monkeypatch.setenv("MEMORY_BROKER_URL", redis.url())
    monkeypatch.setenv("MEMORY_COLLECTION_PREFIX", "t_")
    monkeypatch.setenv("MEMORY_LLM_RATE_LIMITS", '{"fake:m1": {"rpm": 6}}')
    get_settings.cache_clear()
    try:
        rates = RedisRates(client, "t_")
        assert rates.take("fake:m1", RateLimit(rpm=6), 1) == 0
        assert rates.take("fake:m1", RateLimit(rpm=6), 1) > 0
        assert main(["status", "--agent", "a1", "--json"]) == 0
        limit = json.loads(capsys.readouterr().out)["provider_limits"]["fake:m1"]
        assert limit["rpm"] == 6 and limit["deferred"] == 1 and 0 < limit["next_turn_s"] <= 10 * SPACING
    finally:
        get_settings.cache_clear()


def test_the_api_status_and_the_inspector_show_what_a_shared_limit_holds_back(shared, redis, tmp_path):
    from fastapi.testclient import TestClient

    from pipeline.store.sqlite import SQLiteStore
    from tests.api.harness import build, ui_sign_in

    client, rates = shared
    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.create_indexes()
    api = build(store, broker_url=redis.url(), collection_prefix="t_", llm_rate_limits={"fake:m1": {"rpm": 6}})
    assert rates.take("fake:m1", RateLimit(rpm=6), 1) == 0
    assert rates.take("fake:m1", RateLimit(rpm=6), 1) > 0
    with TestClient(api.app) as http:
        answer = http.get("/v1/agents/A/status", headers={"Authorization": f"Bearer {api.keys['admin']}"})
        assert answer.status_code == 200
        limit = answer.json()["provider_limits"]["fake:m1"]
        assert limit["deferred"] == 1 and 0 < limit["next_turn_s"] <= 10 * SPACING
        ui_sign_in(http, api.keys["admin"])
        page = http.get("/ui/runs").text
        assert "Provider limits" in page and "fake:m1" in page and "throttled" in page
