"""A user's own MCP session: the conversation of an MCP connection that names no session.

Its id is derived from the agent and the user, ``mcp:<agent>:<user>``, so no other principal
can name it for themselves: the ``mcp:`` prefix is reserved, and a session under it may have
one human only, the user whose id it is (design §12 "Sessions belong to their people"). The agent is part
of the id because session ids are one namespace across agents (a stored session belongs to one
agent): without it, a user of one agent would hold the MCP session of the same user id of
another agent. An id too long for the 128 characters of an event id is a digest instead.

The rule is pure: the API's doors (``api.membership``), the in-process facade
(``pipeline.service``) and the stdio server (``api.identity``) all ask here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

PREFIX = "mcp:"
_MAX_ID = 128


def default_session(agent_id: str, user_id: str) -> str:
    """The user's own MCP session with this agent."""
    plain = f"{PREFIX}{agent_id}:{user_id}"
    if len(plain) <= _MAX_ID:
        return plain
    # NUL cannot occur in an id (control characters are refused), so the pair is unambiguous
    return PREFIX + hashlib.sha256(f"{agent_id}\0{user_id}".encode()).hexdigest()


def is_reserved(session_id: str) -> bool:
    """Whether ``session_id`` is some user's own MCP session (one human only, that user)."""
    return session_id.startswith(PREFIX)


def strangers(agent_id: str, session_id: str, humans: Iterable[str]) -> list[str]:
    """Those of ``humans`` that may not be humans of ``session_id``: under the reserved prefix,
    everyone but the user whose own session it is; elsewhere nobody (the platform decides)."""
    if not is_reserved(session_id):
        return []
    return [h for h in dict.fromkeys(humans) if default_session(agent_id, h) != session_id]


def stranger_reason(session_id: str, stranger: str) -> str:
    """Why ``stranger`` was refused as a human of ``session_id``: one sentence for every door."""
    return (f"session {session_id!r} is one user's own MCP session ({PREFIX}<agent>:<user>): "
            f"{stranger!r} cannot be one of its humans")


def refuse_strangers(agent_id: str, session_id: str, humans: Iterable[str], where: str) -> None:
    """``InvalidInput`` at ``where`` when ``humans`` would put a stranger into someone's own
    MCP session (the in-process facade's check; the API answers 403 before it gets here)."""
    from pipeline.errors import InvalidInput

    found = strangers(agent_id, session_id, humans)
    if found:
        raise InvalidInput(where, stranger_reason(session_id, found[0]))
