"""What the shared provider limits hold back now (design §8), as ``memoryctl status``,
``GET /v1/agents/{a}/status`` and the inspector's Runs page show it."""

from __future__ import annotations

from pipeline.llm.broker_redis import broker_redis
from schemas.settings import Settings


def provider_limits(settings: Settings) -> dict[str, dict]:
    """The shared provider limits and what they hold back now (``pipeline.llm.rates_redis``),
    read from the broker's Redis; a Redis that does not answer is said per limit, not raised."""
    if not settings.llm_rate_limits:
        return {}
    import redis

    from pipeline.llm.rates_redis import limits_status

    try:
        return limits_status(settings, broker_redis(settings, timeout_s=2.0))
    except redis.RedisError as exc:
        return {name: {"rpm": v.get("rpm", 0), "tpm": v.get("tpm", 0),
                       "error": f"the broker's Redis did not answer ({type(exc).__name__})"}
                for name, v in settings.llm_rate_limits.items()}
