"""Which model each call uses (design §5, §8): a table of settings per provider.

- The fast model runs fact extraction and the dedup decision.
- The tier model runs reflections and consolidation: the free model for tier 0, the premium
  model for tier >= 1 or a preview user. In a group chat the caller passes the highest tier
  present (and whether anyone is on preview).
"""

from __future__ import annotations

from schemas.settings import Settings

OFFLINE_MODEL = "offline-rules-v1"  # the name the offline provider reports (pipeline.llm.offline.MODEL)

_FIELDS = {
    # provider: (fast, free, premium) setting names
    "openai": ("openai_fast_model", "openai_free_model", "openai_premium_model"),
    "gemini": ("gemini_fast_model", "gemini_free_model", "gemini_premium_model"),
}


def fast_model(settings: Settings, provider: str | None = None) -> str:
    """The model for extract_facts and decide_facts."""
    fields = _fields(settings, provider)
    return OFFLINE_MODEL if fields is None else getattr(settings, fields[0])


def tier_model(settings: Settings, max_tier: int, preview: bool = False, provider: str | None = None) -> str:
    """The model for extract_reflections and consolidate, given the highest tier present."""
    fields = _fields(settings, provider)
    if fields is None:
        return OFFLINE_MODEL
    premium = max_tier >= 1 or preview
    return getattr(settings, fields[2] if premium else fields[1])


def _fields(settings: Settings, provider: str | None) -> tuple[str, str, str] | None:
    name = provider or settings.resolved_llm_provider()
    if name in _FIELDS:
        return _FIELDS[name]
    # offline and scripted providers have no model to choose
    return None


def tier_timeouts(settings: Settings, provider: str) -> dict[str, float]:
    """Each model of ``provider``'s tiers -> its call timeout. A model serving two tiers gets
    the longer timeout of the two."""
    fields = _FIELDS.get(provider)
    if fields is None:
        return {}
    timeouts: dict[str, float] = {}
    limits = (settings.llm_timeout_fast_s, settings.llm_timeout_free_s, settings.llm_timeout_premium_s)
    for name, limit in zip(fields, limits, strict=True):
        model = getattr(settings, name)
        timeouts[model] = max(limit, timeouts.get(model, 0.0))
    return timeouts


def timeout_for_model(timeouts: dict[str, float], model: str, settings: Settings) -> float:
    """The timeout of ``model``; a model outside the tier settings gets the longest tier's."""
    if model in timeouts:
        return timeouts[model]
    return max(settings.llm_timeout_fast_s, settings.llm_timeout_free_s, settings.llm_timeout_premium_s)
