"""Network embedders run their real SDKs against a real local HTTP server."""

from __future__ import annotations

import pytest

from testkit.llm_server import LLMServer


@pytest.fixture
def llm_server():
    with LLMServer() as server:
        yield server
