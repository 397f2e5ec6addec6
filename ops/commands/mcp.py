"""``memoryctl mcp``: the MCP server over stdio, for an MCP client that starts it (design §12).

    MEMORY_MCP_AGENT=agent-juniper MEMORY_MCP_USER=user-maya [MEMORY_MCP_SESSION=s1] memoryctl mcp
    memoryctl mcp --print-config     # the client config block (mcpServers JSON) for this environment

The client's config names agent, user and session in the server's environment (``api.identity``);
the model only sees the tools (``api.mcp``). Reads go to ``MEMORY_STORE_URL``, which must exist;
``remember`` publishes to ``MEMORY_BROKER_URL``, where the ingest workers take it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from schemas.settings import get_settings


def client_config(environ: dict[str, str]) -> dict:
    """The ``mcpServers`` block an MCP client (Claude Desktop, an agents SDK) starts this server
    with: the absolute command, since a desktop client does not share this shell's PATH, and
    the environment that fixes whose memory it serves."""
    from api.identity import AGENT_VAR, SESSION_VAR, USER_VAR, from_environment
    from ops.stores import describe

    identity = from_environment(environ)
    settings = get_settings()
    command, args = _command()
    env = {AGENT_VAR: identity.agent_id, USER_VAR: identity.user_id, SESSION_VAR: identity.session_id,
           "MEMORY_STORE_URL": describe(settings.store_url), "MEMORY_BROKER_URL": settings.broker_url}
    return {"mcpServers": {"memory": {"command": command, "args": args, "env": env}}}


def _command() -> tuple[str, list[str]]:
    """The running ``memoryctl``, else the one installed beside this interpreter or on PATH,
    else this interpreter running the module."""
    running = Path(sys.argv[0])
    beside = Path(sys.executable).parent / "memoryctl"
    for candidate in (running if running.name == "memoryctl" else None, beside, shutil.which("memoryctl")):
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve()), ["mcp"]
    return sys.executable, ["-m", "ops.cli", "mcp"]


def _serve(args: argparse.Namespace) -> int:
    if args.print_config:
        print(json.dumps(client_config(dict(os.environ)), indent=2))
        return 0
    from api.identity import from_environment
    from api.mcp import build_server, connection_identity, service_cache
    from ops.broker import RefusingPublisher, in_process
    from ops.stores import open_existing
    from workers.client import memory_service

    identity = from_environment(os.environ)
    settings = get_settings()
    store = open_existing(settings)   # a read never invents an empty store
    clients = {"store": store}
    if in_process(settings):  # the demo's broker: reading the demo store works, remember is refused
        clients["publisher"] = RefusingPublisher(settings)
        print("mcp: MEMORY_BROKER_URL is memory:// (the demo's in-process broker): search_memory and "
              "get_memory_context read the store; remember is refused until it names your Redis", file=sys.stderr)
    try:
        server = build_server(service_cache(lambda agent: memory_service(agent, settings=settings, **clients)),
                              connection_identity(identity))
        print(f"mcp: serving agent {identity.agent_id}, user {identity.user_id}, session {identity.session_id} "
              "over stdio", file=sys.stderr)
        server.run("stdio")
    finally:
        store.close()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve memory to an MCP client over stdio (identity from MEMORY_MCP_*)")
    p.add_argument("--print-config", "--json", dest="print_config", action="store_true",
                   help="print the MCP client config block (mcpServers JSON) for this environment and exit")
    p.set_defaults(func=_serve)
