"""The live suite: the same code against the real services, each part only when its variable is set.

``make test-live`` runs it (``pytest tests/live -rs``). Each part skips with one line naming
what it needs, so the skip summary is the checklist. Under plain ``make test`` (the tests
directory as a whole) every live test is skipped: a key exported in a developer's shell never
turns the ordinary suite into paid API calls.

| variable | part |
|---|---|
| ``OPENAI_API_KEY`` | a formation with the OpenAI LLM and embedder, an embedding call |
| ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``) | the same with Gemini |
| ``MEMORY_TEST_OPENAI_BASE_URL`` + ``MEMORY_TEST_OPENAI_MODEL`` | a formation on an OpenAI-compatible server (Ollama, vLLM, ...) in ``auto`` mode |
| ``MEMORY_TEST_MONGO_URL`` | the store contract, create-indexes and Atlas search on atlas-local |
"""

from __future__ import annotations

from pathlib import Path

import pytest

LIVE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _named(config):
        return
    skip = pytest.mark.skip(reason="live suite: runs only when tests/live is named (make test-live)")
    for item in items:
        if LIVE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


def _named(config: pytest.Config) -> bool:
    """True when the command line names tests/live or a path inside it."""
    for arg in config.args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path == LIVE or LIVE in path.parents:
            return True
    return False
