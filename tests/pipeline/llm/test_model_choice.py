import pytest

from pipeline.llm.models import OFFLINE_MODEL, fast_model, tier_model, tier_timeouts, timeout_for_model
from schemas.settings import Settings


def _settings(**kw):
    return Settings(openai_api_key=None, gemini_api_key=None, **kw)


@pytest.mark.parametrize(
    ("provider", "expected"),
    [("gemini", "gemini-3.8-flash"), ("openai", "gpt-6-luna"), ("offline", OFFLINE_MODEL)],
)
def test_fast_model_is_the_providers_fast_model_setting(provider, expected):
    assert fast_model(_settings(llm_provider=provider)) == expected


@pytest.mark.parametrize(
    ("provider", "max_tier", "preview", "expected"),
    [
        ("gemini", 0, False, "gemini-3.8-flash"),
        ("gemini", 1, False, "gemini-3.1-pro-preview"),
        ("gemini", 3, False, "gemini-3.1-pro-preview"),
        ("gemini", 0, True, "gemini-3.1-pro-preview"),
        ("openai", 0, False, "gpt-6-luna"),
        ("openai", 2, False, "gpt-6.1-sol"),
        ("openai", 0, True, "gpt-6.1-sol"),
        ("offline", 5, True, OFFLINE_MODEL),
    ],
)
def test_tier_model_is_free_for_tier_zero_and_premium_for_paying_or_preview_users(provider, max_tier, preview, expected):
    assert tier_model(_settings(llm_provider=provider), max_tier, preview) == expected


def test_model_names_come_from_settings():
    settings = _settings(llm_provider="openai", openai_fast_model="f", openai_free_model="a", openai_premium_model="b")
    assert (fast_model(settings), tier_model(settings, 0), tier_model(settings, 1)) == ("f", "a", "b")


def test_an_explicit_provider_overrides_the_settings_provider():
    settings = _settings(llm_provider="openai")
    assert tier_model(settings, 1, provider="gemini") == "gemini-3.1-pro-preview"


def test_without_a_provider_setting_the_key_decides_the_models():
    settings = Settings(openai_api_key="sk-test", gemini_api_key=None)
    assert fast_model(settings) == "gpt-6-luna"


def test_each_tier_model_gets_its_tiers_timeout_and_a_shared_model_the_longer_one():
    settings = _settings(openai_fast_model="small", openai_free_model="small", openai_premium_model="big",
                         llm_timeout_fast_s=20, llm_timeout_free_s=90, llm_timeout_premium_s=240)
    timeouts = tier_timeouts(settings, "openai")
    assert timeouts == {"small": 90, "big": 240}
    assert timeout_for_model(timeouts, "some-other-model", settings) == 240
