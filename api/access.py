"""What a principal reaches (design §12): admin keys every agent, agent keys one agent (read
any of its users, publish), user tokens one user of one agent (and one session, if the token
names one). Every route asks here; none decides reach itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.auth import Principal
from api.errors import Forbidden


@dataclass(frozen=True)
class Reach:
    """The agent, user and session a request acts on, after the credential had its say."""

    agent_id: str
    user_id: str | None
    session_id: str | None


def reach(p: Principal, agent_id: str, *, user_id: str | None = None, session_id: str | None = None,
          user_where: str = "query user", session_where: str = "path session_id", sessions=None,
          needs: str = "read") -> Reach:
    """The (agent, user, session) to act on. An agent key must name its own agent; a user token
    fixes the user (and the session, if it names one): another value anywhere is refused, none
    given means the token's. With ``sessions`` (the store), a user token reaches a stored
    session only if its user is one of that session's humans: another person's conversation
    (its session memory, its messages) is not theirs to read or join. ``needs``: the scope
    the request uses, ``read`` or ``publish`` (design §13: a curator's key may have neither)."""
    if p.kind != "admin" and agent_id != p.agent_id:
        raise Forbidden(f"this credential reaches agent {p.agent_id!r} only", "path agent_id")
    _require_scope(p, needs)
    if p.kind != "user":
        return Reach(agent_id, user_id, session_id)
    if user_id is not None and user_id != p.user_id:
        raise Forbidden("a user token reaches its own user only", user_where)
    if p.session_id is not None and session_id is not None and session_id != p.session_id:
        raise Forbidden("this user token is bound to another session", session_where)
    session_id = session_id if session_id is not None else p.session_id
    if sessions is not None and session_id is not None:
        stored = sessions.get_session(session_id)
        if stored is not None and (stored.agent_id != agent_id or p.user_id not in stored.users):
            raise Forbidden("this session is not one of this user's", session_where)
    return Reach(agent_id, p.user_id, session_id)


def _require_scope(p: Principal, scope: str) -> None:
    if scope not in p.scopes:
        raise Forbidden(f"this key lacks the {scope!r} scope (it has {', '.join(sorted(p.scopes))}); "
                        f"memoryctl keys create --agent A --scopes ... makes one that has it", "header Authorization")


def require_curator(p: Principal, agent_id: str, what: str) -> None:
    """An owner's controls of one agent (instructions, pause, curation; design §13): an admin
    key, or an agent key of that agent with the ``curate`` scope. Neither the runtime's key
    (read, publish) nor a user token."""
    if p.kind == "user":
        raise Forbidden(f"{what} needs a key with the curate scope or an admin key", "header Authorization")
    if p.kind != "admin" and agent_id != p.agent_id:
        raise Forbidden(f"this credential reaches agent {p.agent_id!r} only", "path agent_id")
    _require_scope(p, "curate")


def require_admin(p: Principal, what: str) -> None:
    if p.kind != "admin":
        raise Forbidden(f"{what} needs an admin key", "header Authorization")


def require_not_agent_key(p: Principal, what: str) -> None:
    """Edits, deletions, switches, exports and erasure: the user themself or an admin. An agent
    key reads and publishes only."""
    if p.kind == "agent":
        raise Forbidden(f"{what} needs the user's own token or an admin key; an agent key reads and publishes",
                        "header Authorization")


def require_key(p: Principal, what: str) -> None:
    """Session lifecycle: the agent runtime (agent key) or an admin, not an end user."""
    if p.kind == "user":
        raise Forbidden(f"{what} needs an agent or admin key", "header Authorization")


AGENT_HEADER = "X-Memory-Agent"


def connection(p: Principal, headers, *, sessions=None) -> Reach:
    """What a connection (MCP) acts on: the agent from the credential (an admin key names it in
    ``X-Memory-Agent``); user and session from a user token, or, with a key, from the
    ``X-Memory-User`` / ``X-Memory-Session`` headers that the runtime's code sets (never a
    model's tool arguments). A header contradicting a user token is refused."""
    from api.auth import SESSION_HEADER, USER_HEADER

    agent_id = p.agent_id if p.kind != "admin" else headers.get(AGENT_HEADER)
    if not agent_id:
        raise Forbidden(f"an admin key names the agent in {AGENT_HEADER}", f"header {AGENT_HEADER}")
    return reach(p, agent_id, user_id=headers.get(USER_HEADER) or None,
                 session_id=headers.get(SESSION_HEADER) or None, user_where=f"header {USER_HEADER}",
                 session_where=f"header {SESSION_HEADER}", sessions=sessions)
