"""The default models are current: none is deprecated by its provider.

The openai SDK ships OpenAI's deprecation list in the docstring of its ``ChatModel`` type
(``openai/types/shared/chat_model.py``: '"gpt-5-mini", ...: Announced shutdown date:
2026-12-11'); the test reads it from the installed SDK, so a newer SDK that deprecates a
default fails ``make test``. google-genai ships no such list: every default is checked against
the dated, cited table the workers and ``memoryctl`` warn from (``pipeline.llm.lifecycle``),
on the day that table was read, so the calendar alone never fails the build.
"""

from __future__ import annotations

import importlib.util
import re
import typing
from pathlib import Path

import pytest

from pipeline.llm import lifecycle
from schemas.settings import Settings

DEFAULTS = Settings(_env_file=None, openai_api_key=None, gemini_api_key=None)
OPENAI_DEFAULTS = sorted({DEFAULTS.openai_fast_model, DEFAULTS.openai_free_model, DEFAULTS.openai_premium_model})
GEMINI_DEFAULTS = sorted({DEFAULTS.gemini_fast_model, DEFAULTS.gemini_free_model, DEFAULTS.gemini_premium_model})
EMBEDDING_DEFAULTS = sorted({DEFAULTS.openai_embedding_model, DEFAULTS.gemini_embedding_model})
_SHUTDOWN = re.compile(r"Announced shutdown date: (\d{4}-\d{2}-\d{2})")


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


@pytest.mark.parametrize("model", OPENAI_DEFAULTS + GEMINI_DEFAULTS + EMBEDDING_DEFAULTS)
def test_every_default_model_is_in_the_dated_shutdown_table(model):
    assert model in lifecycle.SHUTDOWNS, f"default model {model} is missing from pipeline/llm/lifecycle.py"


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_no_default_shuts_down_within_the_warning_window_of_the_day_the_table_was_read(provider):
    defaults = Settings(_env_file=None, llm_provider=provider, embedding_provider=provider,
                        openai_api_key="sk-x", gemini_api_key="g-x")
    assert lifecycle.warnings(defaults, lifecycle.READ_ON) == []


def test_the_table_agrees_with_the_installed_sdks_deprecation_list():
    # a newer SDK that announces (or moves) a shutdown fails here until the table says so
    listed = {model: _SHUTDOWN.search(said) for model, said in openai_deprecations().items()}
    for model, shutdown in lifecycle.SHUTDOWNS.items():
        if model.startswith(("gpt-", "o1", "o3", "o4", "text-embedding-")):
            match = listed.get(model)
            assert (match.group(1) if match else None) == (shutdown.isoformat() if shutdown else None), model
