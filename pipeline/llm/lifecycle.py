"""When the configured models shut down, from the providers' published schedules.

``SHUTDOWNS`` is a dated copy of what OpenAI and Google publish: model -> its announced
shutdown date, or None for a model the provider lists as current with no date announced. It
holds every default model of ``schemas.settings`` (a test fails when a default is missing), so
a deployment on the defaults is always checked. ``expiring`` names each configured model that
shuts down within ``WARN_WITHIN`` of a given day; the workers log it at start and
``memoryctl runs`` and ``memoryctl cost`` print it. The day is always passed in, so tests
freeze it and a calendar date alone never fails a build.

Sources, read on ``READ_ON``:
- OpenAI: https://developers.openai.com/api/docs/deprecations, and the deprecation list the
  openai SDK (3.57) ships in ``openai/types/shared/chat_model.py`` ("Announced shutdown date:
  YYYY-MM-DD"); ``tests/pipeline/llm/test_default_models.py`` checks this table against the
  installed SDK's list, so an SDK that announces a new date fails the build until it is copied.
- Google: https://ai.google.dev/gemini-api/docs/deprecations ("Shutdown date" column; "No
  shutdown date announced" is None here).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from schemas.settings import Settings

READ_ON = date(2026, 11, 26)
WARN_WITHIN = timedelta(days=60)

SHUTDOWNS: dict[str, date | None] = {
    # --- OpenAI (https://developers.openai.com/api/docs/deprecations) -------------------------
    "gpt-6-luna": None,                       # default fast/free model: not on the list
    "gpt-6.1-sol": None,                      # default premium model: not on the list
    "gpt-5-mini": date(2026, 12, 11),         # the fast/free default of design §8 until v2.2
    "gpt-5": date(2026, 12, 11),
    "gpt-5-nano": date(2026, 12, 11),
    "gpt-5.1": date(2027, 4, 1),              # the premium default of design §8 until v2.2
    "gpt-4.1": date(2027, 1, 14),
    "gpt-4.1-mini": date(2027, 1, 14),
    "gpt-4o": date(2027, 1, 14),
    "gpt-4o-mini": date(2027, 1, 14),
    "o3": date(2026, 12, 11),
    "text-embedding-3-small": None,           # default embedding model: not on the list
    # --- Google (https://ai.google.dev/gemini-api/docs/deprecations) --------------------------
    "gemini-3.8-flash": None,                 # default fast/free model: released 2026-09-02
    "gemini-3.1-pro-preview": None,           # default premium model: released 2026-02-19
    "gemini-3-flash-preview": None,           # the fast/free default of design §8 until v2.2
    "gemini-3-pro-preview": date(2026, 3, 9),  # the premium default of design §8: shut down
    "gemini-3.1-flash-lite-preview": date(2026, 5, 25),
    "gemini-3-pro-image-preview": date(2026, 6, 25),
    "gemini-3.1-flash-image-preview": date(2026, 6, 25),
    "gemini-2.0-flash": date(2026, 6, 1),
    "gemini-2.0-flash-lite": date(2026, 6, 1),
    "gemini-2.5-pro": date(2026, 12, 1),
    "gemini-2.5-flash": date(2026, 12, 1),
    "gemini-3.1-flash-lite": date(2027, 5, 7),
    "gemini-embedding-001": None,             # default embedding model: not on the list
}

# the settings that name a model, per provider: the LLM's and the embedder's
_LLM_SETTINGS = {"openai": ("openai_fast_model", "openai_free_model", "openai_premium_model"),
                 "gemini": ("gemini_fast_model", "gemini_free_model", "gemini_premium_model")}
_EMBEDDING_SETTINGS = {"openai": ("openai_embedding_model",), "gemini": ("gemini_embedding_model",)}


@dataclass(frozen=True)
class Expiring:
    model: str
    shutdown: date
    settings: tuple[str, ...]      # the MEMORY_* variables that name it

    def describe(self, today: date) -> str:
        days = (self.shutdown - today).days
        when = f"shut down on {self.shutdown}" if days < 0 else f"shuts down on {self.shutdown} (in {days} days)"
        return (f"model {self.model} ({', '.join(self.settings)}) {when} per its provider's deprecation "
                f"schedule: set another model")


def configured_models(settings: Settings) -> dict[str, tuple[str, ...]]:
    """Each model the active providers would call -> the settings that name it."""
    fields = (_LLM_SETTINGS.get(settings.resolved_llm_provider(), ())
              + _EMBEDDING_SETTINGS.get(settings.resolved_embedding_provider(), ()))
    named: dict[str, list[str]] = {}
    for field in fields:
        named.setdefault(getattr(settings, field), []).append(f"MEMORY_{field.upper()}")
    return {model: tuple(names) for model, names in named.items()}


def expiring(settings: Settings, today: date, within: timedelta = WARN_WITHIN) -> list[Expiring]:
    """The configured models whose published shutdown date is on or before ``today + within``
    (already shut down included), soonest first."""
    found = []
    for model, names in configured_models(settings).items():
        shutdown = SHUTDOWNS.get(model)
        if shutdown is not None and shutdown <= today + within:
            found.append(Expiring(model, shutdown, names))
    return sorted(found, key=lambda e: (e.shutdown, e.model))


def warnings(settings: Settings, today: date) -> list[str]:
    """One line per configured model that shuts down soon (see ``expiring``)."""
    return [item.describe(today) for item in expiring(settings, today)]
