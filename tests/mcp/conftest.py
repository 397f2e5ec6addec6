"""A store formed by the demo, and the environment an MCP client would start the server with."""

from __future__ import annotations

import pytest

from tests.support.demo_store import formed_demo_store


@pytest.fixture(scope="session")
def demo_store_url(tmp_path_factory) -> str:
    return f"sqlite:///{formed_demo_store(tmp_path_factory)}"
