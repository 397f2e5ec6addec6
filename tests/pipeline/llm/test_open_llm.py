import sys
import types

import pytest

from pipeline.llm import open_llm
from pipeline.llm.gemini import GeminiLLM
from pipeline.llm.limits import LimitedLLM, LocalSemaphore, RedisSemaphore
from pipeline.llm.openai import OpenAILLM
from schemas.settings import Settings


class _StandInOffline:
    provider = "offline"

    def __init__(self, settings):
        self.settings = settings


@pytest.fixture
def offline_module(monkeypatch):
    # open_llm imports the offline rules lazily from pipeline.llm.offline; a stand-in shows the choice
    module = types.ModuleType("pipeline.llm.offline")
    module.OfflineLLM = _StandInOffline
    monkeypatch.setitem(sys.modules, "pipeline.llm.offline", module)


def _settings(**kw):
    base = {"openai_api_key": None, "gemini_api_key": None, "broker_url": "memory://"}
    return Settings(**{**base, **kw})


def _unwrapped(llm):
    return llm.inner if isinstance(llm, LimitedLLM) else llm


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (dict(gemini_api_key="g", openai_api_key="o"), GeminiLLM),
        (dict(openai_api_key="o"), OpenAILLM),
        (dict(gemini_api_key="g"), GeminiLLM),
        (dict(llm_provider="openai", gemini_api_key="g", openai_api_key="o"), OpenAILLM),
        (dict(llm_provider="gemini", gemini_api_key="g", openai_api_key="o"), GeminiLLM),
        (dict(), _StandInOffline),
        (dict(llm_provider="offline", gemini_api_key="g", openai_api_key="o"), _StandInOffline),
    ],
    ids=["gemini-key-wins", "openai-key", "gemini-key", "explicit-openai", "explicit-gemini",
         "no-key-offline", "explicit-offline"],
)
def test_the_provider_is_the_explicit_setting_else_gemini_key_then_openai_key_then_offline(
    offline_module, settings, expected,
):
    assert type(_unwrapped(open_llm(_settings(**settings)))) is expected


def test_the_offline_provider_gets_the_settings_and_no_concurrency_cap(offline_module):
    settings = _settings()
    llm = open_llm(settings)
    assert isinstance(llm, _StandInOffline) and llm.settings is settings


def test_network_providers_are_capped_in_process_without_a_redis_broker():
    llm = open_llm(_settings(openai_api_key="o", llm_max_concurrency=3))
    assert isinstance(llm, LimitedLLM) and isinstance(llm.slots, LocalSemaphore)
    assert llm.slots.limit == 3 and llm.provider == "openai"


def test_network_providers_share_a_redis_cap_per_provider_when_given_a_redis_client():
    import fakeredis

    llm = open_llm(_settings(gemini_api_key="g", llm_max_concurrency=4), redis_client=fakeredis.FakeRedis())
    assert isinstance(llm.slots, RedisSemaphore)
    assert (llm.slots.key, llm.slots.limit) == ("memory2_llm_slots:gemini", 4)


def test_workers_hand_the_broker_redis_to_the_cap_and_pipeline_builds_none():
    from workers.deps import Deps

    assert Deps(_settings(broker_url="redis://127.0.0.1:1/0")).slots_redis is not None
    assert Deps(_settings(broker_url="memory://")).slots_redis is None
    llm = open_llm(_settings(openai_api_key="o", broker_url="redis://127.0.0.1:1/0", llm_max_concurrency=2))
    assert isinstance(llm.slots, LocalSemaphore)


def test_a_zero_concurrency_setting_means_no_cap():
    assert isinstance(open_llm(_settings(openai_api_key="o", llm_max_concurrency=0)), OpenAILLM)
