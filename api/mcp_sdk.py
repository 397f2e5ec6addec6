"""The memory MCP server's one adapter to the ``mcp`` SDK (written against ``SDK_VERSION``):
what the server needs of the SDK beyond plain ``MCPServer`` and ``Tool.from_function``, each
with its reason. ``tests/mcp/test_mcp_sdk.py`` fails when the SDK changes under any of it.

- **Unknown arguments refused** (public surface): the SDK's argument models ignore arguments a
  tool does not declare (pydantic's default ``extra="ignore"`` on ``ArgModelBase``,
  ``mcp/server/mcpserver/utilities/func_metadata.py``; modelcontextprotocol/python-sdk issue
  3067, open for 2.x) and offers no option to forbid them. A model that adds ``user_id`` must
  get an error, not a silent drop: each tool publishes ``additionalProperties: false``
  (``Tool.parameters``, the schema ``tools/list`` sends) and a server middleware
  (``MCPServer(middleware=...)``, documented as provisional in 2.x) refuses a ``tools/call``
  whose arguments the tool does not declare, before the SDK validates them.
- **Logging left to the process** (the one internal): ``MCPServer.__init__`` calls
  ``configure_logging`` (``mcp/server/mcpserver/server.py``), i.e. ``logging.basicConfig`` with a
  Rich handler at INFO, and no parameter turns it off; inside the API app it would print every
  library's INFO lines. How a process logs is its owner's choice (uvicorn's, memoryctl's):
  ``quiet_server`` builds the server with the root logger put back as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent

#: the SDK release this adapter was written and tested against
SDK_VERSION = "2.3.0"


def closed(tool: Tool) -> Tool:
    """``tool`` publishing that it takes no argument beyond those it declares."""
    return tool.model_copy(update={"parameters": {**tool.parameters, "additionalProperties": False}})


def refusing_undeclared(tools: Sequence[Tool]):
    """A server middleware that answers a ``tools/call`` naming an argument its tool does not
    declare with a tool error (what, where, why), the tool never run."""
    declared = {tool.name: set(tool.parameters.get("properties", {})) for tool in tools}

    async def middleware(ctx, call_next):
        params: Mapping[str, Any] = ctx.params or {}
        name = params.get("name")
        if ctx.method == "tools/call" and name in declared:
            arguments = params.get("arguments") or {}
            unknown = sorted(str(key) for key in arguments if key not in declared[name]) if isinstance(
                arguments, Mapping) else []
            if unknown:
                takes = ", ".join(sorted(declared[name])) or "no arguments"
                return CallToolResult(is_error=True, content=[TextContent(text=(
                    f"{name}: {', '.join(unknown)}: Extra inputs are not permitted (the tool takes {takes}; "
                    "whose memory it reads is chosen by the connection, never by an argument)"))])
        return await call_next(ctx)

    return middleware


def quiet_server(make: Callable[[], MCPServer]) -> MCPServer:
    """``make()`` with the root logger's handlers and level as they were before (see above)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        return make()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
