"""Whose memory an MCP connection reads and writes: agent, user and session, fixed by the
connection (the stdio server's environment, or the HTTP request's credential), never by what a
model writes into a tool call (design §12 "Interfaces").

The stdio server (``memoryctl mcp``) is started by an MCP client from its config, so its
environment is the connection: ``MEMORY_MCP_AGENT``, ``MEMORY_MCP_USER`` and, optionally,
``MEMORY_MCP_SESSION``. Without a session, the user's own MCP conversation
``mcp:<agent>:<user>`` (``pipeline.own_session``) is used, so that ``remember`` has a session
to publish into and reads see a one-to-one session; that session is this user's alone, and
naming another user's is refused at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from pipeline.errors import ConfigurationError
from pipeline.own_session import default_session, stranger_reason, strangers
from schemas.events import Id

AGENT_VAR = "MEMORY_MCP_AGENT"
USER_VAR = "MEMORY_MCP_USER"
SESSION_VAR = "MEMORY_MCP_SESSION"
_ID = TypeAdapter(Id)


@dataclass(frozen=True)
class Identity:
    """One agent's memory of one user, in one session."""

    agent_id: str
    user_id: str
    session_id: str


def check_id(value: object, where: str) -> str:
    """``value`` as an event id field accepts it (1-128 characters, no control characters),
    or ``ConfigurationError`` naming ``where``."""
    try:
        return _ID.validate_python(value)
    except ValidationError as exc:
        raise ConfigurationError(f"{where}: {exc.errors()[0]['msg']} (got {value!r:.60})") from None


def from_environment(environ: Mapping[str, str]) -> Identity:
    """The stdio connection's identity, from ``MEMORY_MCP_AGENT`` / ``_USER`` / ``_SESSION``."""
    missing = [name for name in (AGENT_VAR, USER_VAR) if not environ.get(name, "").strip()]
    if missing:
        raise ConfigurationError(
            f"{' and '.join(missing)} must be set: the MCP server serves one agent's memory of one user, "
            "named by the client's config, never by the model")
    agent = check_id(environ[AGENT_VAR], AGENT_VAR)
    user = check_id(environ[USER_VAR], USER_VAR)
    named = environ.get(SESSION_VAR, "").strip()
    session = check_id(named, SESSION_VAR) if named else default_session(agent, user)
    if strangers(agent, session, [user]):
        raise ConfigurationError(f"{SESSION_VAR}: {stranger_reason(session, user)}")
    return Identity(agent, user, session)
