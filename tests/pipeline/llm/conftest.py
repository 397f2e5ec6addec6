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
