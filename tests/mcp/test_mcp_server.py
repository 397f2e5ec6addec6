"""The server object itself: strict tool schemas, and a process's logging left as its owner set it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from api.identity import Identity, from_environment
from api.mcp import build_server, connection_identity
from pipeline.errors import ConfigurationError
from pipeline.own_session import default_session


def test_building_the_server_leaves_the_root_logger_alone():
    # as in a fresh uvicorn worker: no root handler (pytest's own are set aside meanwhile), for
    # logging.basicConfig inside the SDK would otherwise add one
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers[:] = []
    try:
        build_server(lambda agent: None, connection_identity(Identity("a", "u", "s")))
        assert root.handlers == [] and root.level == level
    finally:
        root.handlers[:] = saved


def test_every_tool_schema_refuses_unknown_arguments_and_names_no_identity():
    server = build_server(lambda agent: None, connection_identity(Identity("a", "u", "s")))
    tools = asyncio.run(server.list_tools())
    assert {t.name for t in tools} == {"search_memory", "get_memory_context", "remember"}
    for tool in tools:
        assert tool.input_schema["additionalProperties"] is False
        assert set(tool.input_schema.get("properties", {})) <= {"query", "text", "categories", "metadata"}
        assert tool.description and len(tool.description) > 60  # described for a model


def test_a_connection_without_a_session_gets_the_users_own_mcp_session():
    assert default_session("agent-juniper", "user-maya") == "mcp:agent-juniper:user-maya"
    long_id = "u" * 128
    assert len(default_session("a", long_id)) <= 128
    assert default_session("a", long_id) != default_session("a", "u" * 127 + "v") != default_session("b", long_id)
    environ = {"MEMORY_MCP_AGENT": "a", "MEMORY_MCP_USER": "user-maya"}
    assert from_environment(environ).session_id == "mcp:a:user-maya"


def test_the_stdio_server_refuses_to_start_in_another_users_own_session():
    environ = {"MEMORY_MCP_AGENT": "a", "MEMORY_MCP_USER": "user-tom", "MEMORY_MCP_SESSION": "mcp:a:user-maya"}
    with pytest.raises(ConfigurationError, match="MEMORY_MCP_SESSION: .*'user-tom' cannot be one of its humans"):
        from_environment(environ)


def _remembering(tmp_path):
    from pipeline.clock import FrozenClock
    from pipeline.embeddings.hashing import HashingEmbedder
    from pipeline.service import MemoryService
    from pipeline.store.sqlite import SQLiteStore
    from schemas.settings import Settings
    from testkit.documents import T0
    from testkit.publishers import RecordingPublisher

    publisher = RecordingPublisher()
    service = MemoryService("a", settings=Settings(_env_file=None), store=SQLiteStore(str(tmp_path / "m.db")),
                            embedder=HashingEmbedder(64), publisher=publisher, clock=FrozenClock(T0))
    return build_server(lambda agent: service, connection_identity(Identity("a", "u", "s"))), publisher


def test_remember_publishes_the_metadata_given_on_the_users_own_message(tmp_path):
    server, publisher = _remembering(tmp_path)
    [schema] = [t.input_schema for t in asyncio.run(server.list_tools()) if t.name == "remember"]
    assert schema["properties"]["metadata"]["anyOf"][0]["type"] == "object"  # declared for the model
    asyncio.run(server.call_tool("remember", {"text": "Ship Apollo on Friday", "metadata": {"project": "apollo"}}))
    note = publisher.events[0]
    assert note["metadata"] == {"project": "apollo"}
    assert (note["agent_id"], note["session_id"], note["message"]["sender_id"]) == ("a", "s", "u")


def test_remember_refuses_bad_metadata_naming_the_key_and_publishes_nothing(tmp_path):
    from mcp.server.mcpserver.exceptions import ToolError

    server, publisher = _remembering(tmp_path)
    with pytest.raises(ToolError, match="metadata.tier"):
        asyncio.run(server.call_tool("remember", {"text": "Ship Apollo on Friday", "metadata": {"tier": 0.5}}))
    assert publisher.events == []
