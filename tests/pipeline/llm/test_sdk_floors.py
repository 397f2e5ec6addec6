"""The SDK floors in pyproject.toml cover every piece of SDK surface the adapters use.

Each row names one attribute or parameter an adapter relies on and the SDK release that
introduced it (from the SDK's CHANGELOG.md). The test checks that the installed SDK has it
and that pyproject's floor, in the extra and in ``test``, is at least that release, so that
``pip install 'memory-pipeline[openai]'`` can never resolve to an SDK the adapter breaks on.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _params(func) -> set[str]:
    return set(inspect.signature(func).parameters)


def _openai_create():
    from openai.resources.chat.completions import Completions

    return Completions.create


def _openai_embed():
    from openai.resources.embeddings import Embeddings

    return Embeddings.create


def _openai_client():
    import openai

    return openai.OpenAI.__init__


def _api_error():
    from google.genai import errors

    return errors.APIError(400, {"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}})


def _fields(model: str) -> set[str]:
    from google.genai import types

    return set(getattr(types, model).model_fields)


# (package, introduced in, what, check: returns the names found, names the adapter uses)
SURFACE = [
    # openai CHANGELOG 1.0.0: the v1 client, per-call timeout, max_retries, http_client, the error classes
    ("openai", "1.0.0", "OpenAI(...)", lambda: _params(_openai_client()),
     {"api_key", "base_url", "timeout", "max_retries", "http_client"}),
    ("openai", "1.0.0", "chat.completions.create(...)", lambda: _params(_openai_create()),
     {"model", "messages", "response_format", "timeout"}),
    ("openai", "1.0.0", "error classes", lambda: set(dir(__import__("openai"))),
     {"OpenAIError", "APIConnectionError", "APITimeoutError", "APIStatusError", "BadRequestError",
      "APIResponseValidationError"}),
    # openai CHANGELOG 1.10.0 (2024-01-25): embeddings `dimensions` for text-embedding-3
    ("openai", "1.10.0", "embeddings.create(...)", lambda: _params(_openai_embed()),
     {"model", "input", "encoding_format", "dimensions", "timeout"}),
    # openai CHANGELOG 1.40.0 (2024-08-06): response_format json_schema (structured outputs)
    ("openai", "1.40.0", "response_format json_schema", lambda: set(dir(__import__("openai.types.shared_params",
                                                                                 fromlist=["x"]))),
     {"ResponseFormatJSONSchema", "ResponseFormatJSONObject"}),
    # openai CHANGELOG 1.55.3 (2024-12-03): "fix(client): compat with new httpx 0.28.0 release"; before it
    # the client passes `proxies`, which httpx >= 0.28 refuses at construction (openai-python#1902)
    ("openai", "1.55.3", "a client under httpx >= 0.28", lambda: {"httpx-0.28"}, {"httpx-0.28"}),
    # google-genai CHANGELOG 1.46.0: HttpOptions(httpx_client=...)
    ("google-genai", "1.46.0", "types.HttpOptions", lambda: _fields("HttpOptions"),
     {"timeout", "base_url", "httpx_client"}),
    # present by 1.46.0, the floor (response_json_schema, thoughts_token_count, output_dimensionality)
    ("google-genai", "1.46.0", "types.GenerateContentConfig", lambda: _fields("GenerateContentConfig"),
     {"system_instruction", "response_mime_type", "response_json_schema", "http_options"}),
    ("google-genai", "1.46.0", "types.GenerateContentResponseUsageMetadata",
     lambda: _fields("GenerateContentResponseUsageMetadata"),
     {"prompt_token_count", "candidates_token_count", "thoughts_token_count"}),
    ("google-genai", "1.46.0", "types.EmbedContentConfig", lambda: _fields("EmbedContentConfig"),
     {"output_dimensionality", "http_options"}),
    ("google-genai", "1.46.0", "errors.APIError", lambda: set(vars(_api_error())),
     {"code", "status", "message", "details", "response"}),
]


def _version(text: str) -> tuple[int, ...]:
    parts = [int(part) for part in re.findall(r"\d+", text)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def _floors() -> dict[str, dict[str, tuple[int, ...]]]:
    """{extra: {package: floor}} from pyproject's optional dependencies."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floors: dict[str, dict[str, tuple[int, ...]]] = {}
    for extra, requirements in extras.items():
        for requirement in requirements:
            match = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", requirement)
            if match:
                floors.setdefault(extra, {})[match.group(1)] = _version(match.group(2))
    return floors


@pytest.mark.parametrize(("package", "introduced", "what", "found", "used"), SURFACE, ids=[row[2] for row in SURFACE])
def test_the_installed_sdk_has_what_the_adapter_uses(package, introduced, what, found, used):
    missing = used - found()
    assert not missing, f"{package} {what} lacks {sorted(missing)}"


@pytest.mark.parametrize(("package", "extra"), [("openai", "openai"), ("openai", "test"),
                                                ("google-genai", "gemini"), ("google-genai", "test")])
def test_pyprojects_floor_is_at_least_the_newest_release_the_adapter_needs(package, extra):
    needed = max(_version(row[1]) for row in SURFACE if row[0] == package)
    floor = _floors()[extra].get(package)
    assert floor is not None, f"pyproject's [{extra}] extra sets no floor for {package}"
    assert floor >= needed, f"[{extra}] {package}>={'.'.join(map(str, floor))} but the adapter needs {needed}"
