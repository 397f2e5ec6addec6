"""The default models are current: none is deprecated by its provider.

The openai SDK ships OpenAI's deprecation list in the docstring of its ``ChatModel`` type
(``openai/types/shared/chat_model.py``: '"gpt-5-mini", ...: Announced shutdown date:
2026-12-11'); the test reads it from the installed SDK, so a newer SDK that deprecates a
default fails ``make test``. google-genai ships no such list: the Gemini defaults are checked
against the shutdowns of https://ai.google.dev/gemini-api/docs/deprecations, copied below.
"""

from __future__ import annotations

import importlib.util
import re
import typing
from datetime import date, timedelta
from pathlib import Path

import pytest

from schemas.settings import Settings

DEFAULTS = Settings(_env_file=None, openai_api_key=None, gemini_api_key=None)
OPENAI_DEFAULTS = sorted({DEFAULTS.openai_fast_model, DEFAULTS.openai_free_model, DEFAULTS.openai_premium_model})
GEMINI_DEFAULTS = sorted({DEFAULTS.gemini_fast_model, DEFAULTS.gemini_free_model, DEFAULTS.gemini_premium_model})
WARNING = timedelta(days=90)

# https://ai.google.dev/gemini-api/docs/deprecations (read 2026-11): model -> shutdown date
GEMINI_SHUTDOWNS = {
    "gemini-3-pro-preview": date(2026, 3, 9),
    "gemini-3.1-flash-lite-preview": date(2026, 5, 25),
    "gemini-3-pro-image-preview": date(2026, 6, 25),
    "gemini-3.1-flash-image-preview": date(2026, 6, 25),
    "gemini-2.0-flash": date(2026, 6, 1),
    "gemini-2.0-flash-lite": date(2026, 6, 1),
    "gemini-2.5-pro": date(2026, 12, 1),
    "gemini-2.5-flash": date(2026, 12, 1),
    "gemini-3.1-flash-lite": date(2027, 5, 7),
}


def openai_deprecations() -> dict[str, str]:
    """model -> what the installed SDK says of it ("Announced shutdown date: YYYY-MM-DD", ...)."""
    spec = importlib.util.find_spec("openai.types.shared.chat_model")
    assert spec is not None and spec.origin, "the openai SDK has no types/shared/chat_model.py"
    text = Path(spec.origin).read_text()
    block = text.split('"""Deprecated values:', 1)
    if len(block) < 2:
        return {}
    out: dict[str, str] = {}
    for entry in re.split(r"\n- ", block[1].split('"""', 1)[0]):
        names, _, said = entry.partition(":")
        for name in re.findall(r'"([^"]+)"', names):
            out[name] = " ".join(said.split())
    return out


def test_the_sdk_deprecation_list_is_read():
    # the reader works on the installed SDK: gpt-5-mini's shutdown is on it
    assert "2026-12-11" in openai_deprecations()["gpt-5-mini"]


@pytest.mark.parametrize("model", OPENAI_DEFAULTS)
def test_no_openai_default_is_on_the_installed_sdks_deprecation_list(model):
    said = openai_deprecations().get(model)
    assert said is None, f"default model {model} is deprecated by OpenAI: {said}"


@pytest.mark.parametrize("model", OPENAI_DEFAULTS)
def test_every_openai_default_is_in_the_sdks_model_catalogue(model):
    from openai.types.shared.chat_model import ChatModel

    assert model in typing.get_args(ChatModel)


def test_the_openai_embedding_default_is_in_the_sdks_catalogue_and_not_deprecated():
    from openai.types.embedding_model import EmbeddingModel

    assert DEFAULTS.openai_embedding_model in typing.get_args(EmbeddingModel)
    assert DEFAULTS.openai_embedding_model not in openai_deprecations()


@pytest.mark.parametrize("model", GEMINI_DEFAULTS)
def test_no_gemini_default_is_shut_down_or_shutting_down_soon(model):
    shutdown = GEMINI_SHUTDOWNS.get(model)
    assert shutdown is None or shutdown > date.today() + WARNING, f"{model} shuts down on {shutdown}"
