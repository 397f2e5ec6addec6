"""What ``api.mcp_sdk`` relies on in the ``mcp`` SDK still holds: each test names the SDK
behaviour or signature the adapter was written against, so an SDK upgrade that changes it
fails here, before a model can pass ``user_id`` unnoticed or the SDK's logging takes over a
process."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from importlib.metadata import version

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase

from api.mcp_sdk import SDK_VERSION, closed, quiet_server, refusing_undeclared


def test_the_installed_sdk_is_the_release_the_adapter_was_written_against():
    assert version("mcp") == SDK_VERSION, "review api/mcp_sdk.py against this SDK release, then bump SDK_VERSION"


def test_the_sdk_still_drops_undeclared_arguments_so_the_refusing_middleware_is_still_needed():
    # modelcontextprotocol/python-sdk issue 3067: when this fails, the SDK refuses them itself
    assert ArgModelBase.model_config.get("extra") in (None, "ignore")

    async def search_memory(query: str) -> str:
        return query

    tool = Tool.from_function(search_memory)
    assert "additionalProperties" not in tool.parameters
    assert "user_id" not in tool.fn_metadata.arg_model.model_validate({"query": "q", "user_id": "x"}).model_dump()


def test_the_public_surface_the_adapter_uses_is_still_there():
    assert {"middleware", "tools", "instructions", "version"} <= set(inspect.signature(MCPServer.__init__).parameters)
    assert {"method", "params"} <= {f.name for f in dataclasses.fields(ServerRequestContext)}

    async def remember(text: str) -> str:
        return text

    schema = closed(Tool.from_function(remember)).parameters
    assert schema["additionalProperties"] is False and set(schema["properties"]) == {"text"}


def test_building_a_server_still_configures_the_root_logger_which_quiet_server_undoes():
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers[:] = []
    try:
        MCPServer("probe")
        assert root.handlers, "the SDK no longer calls logging.basicConfig: quiet_server can go"
        root.handlers[:] = []
        root.setLevel(level)
        quiet_server(lambda: MCPServer("probe"))
        assert root.handlers == [] and root.level == level
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


async def _passed(ctx):
    return "ran"


def test_the_middleware_answers_an_undeclared_argument_with_a_tool_error_and_passes_the_rest():
    async def search_memory(query: str) -> str:
        return query

    middleware = refusing_undeclared([closed(Tool.from_function(search_memory))])

    def call(method, params):
        ctx = ServerRequestContext(session=None, lifespan_context=None, protocol_version="2025-11-25", method=method,
                                   params=params)
        return asyncio.run(middleware(ctx, _passed))

    refused = call("tools/call", {"name": "search_memory", "arguments": {"query": "q", "user_id": "u-2"}})
    assert refused.is_error and "user_id: Extra inputs are not permitted" in refused.content[0].text
    assert call("tools/call", {"name": "search_memory", "arguments": {"query": "q"}}) == "ran"
    assert call("tools/list", None) == "ran"
