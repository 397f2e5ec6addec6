"""LLM providers: OpenAI, Gemini, the offline rules and the scripted fake, behind one port."""

from __future__ import annotations

from typing import Any

from pipeline.errors import ConfigurationError
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from schemas.settings import Settings

__all__ = ["LLM", "LLMRequest", "LLMResponse", "open_llm"]


def open_llm(settings: Settings, *, redis_client: Any = None) -> LLM:
    """The LLM of ``settings.resolved_llm_provider()``.

    An explicit ``MEMORY_LLM_PROVIDER`` wins; else a Gemini key, then an OpenAI key, then the
    offline rules. Network providers are wrapped in the concurrency cap of
    ``MEMORY_LLM_MAX_CONCURRENCY`` and the rate limits of ``MEMORY_LLM_RATE_LIMITS``: shared by
    every worker through ``redis_client`` when one is given (``workers.deps`` gives the
    broker's), else per process.
    """
    provider = settings.resolved_llm_provider()
    if provider == "offline":
        from pipeline.llm.offline import OfflineLLM

        return OfflineLLM(settings)
    if provider == "openai":
        from pipeline.llm.openai import OpenAILLM

        llm: LLM = OpenAILLM.from_settings(settings)
    elif provider == "gemini":
        from pipeline.llm.gemini import GeminiLLM

        llm = GeminiLLM.from_settings(settings)
    else:
        raise ConfigurationError(f"MEMORY_LLM_PROVIDER: unknown provider {provider!r} (openai, gemini or offline)")
    from pipeline.llm.limits import limit_concurrency
    from pipeline.llm.rates import limit_rate

    # the rate limit outside the concurrency cap: a call waiting for its turn holds no slot
    return limit_rate(limit_concurrency(llm, settings, redis_client=redis_client), settings, redis_client=redis_client)
