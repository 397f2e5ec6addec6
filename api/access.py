"""What a principal reaches (design §12): admin keys every agent, agent keys one agent (read
any of its users, publish), user tokens one user of one agent (and one session, if the token
names one). Every route asks here; none decides reach itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from api.auth import Principal
from api.errors import ApiError, Forbidden
from api.membership import check_session
from pipeline.own_session import default_session
from schemas.events import Id

_ID = TypeAdapter(Id)


@dataclass(frozen=True)
class Reach:
    """The agent, user and session a request acts on, after the credential had its say."""

    agent_id: str
    user_id: str | None
    session_id: str | None


def reach(p: Principal, agent_id: str, *, user_id: str | None = None, session_id: str | None = None,
          user_where: str = "query user_id", session_where: str = "path session_id", sessions=None,
          humans: Iterable[str] = (), starts: bool = False, needs: str = "read") -> Reach:
    """The (agent, user, session) to act on. An agent key must name its own agent; a user token
    fixes the user (and the session, if it names one): another value anywhere is refused, none
    given means the token's. The session, if any, passes the one membership rule
    (``api.membership.check_session``, with ``sessions`` the store, ``humans`` what a key
    declares, ``starts`` when the request may create it). ``needs``: the scope the request
    uses, ``read`` or ``publish`` (design §13: a curator's key may have neither)."""
    require_agent(p, agent_id)
    _require_scope(p, needs)
    if p.kind == "user":
        if user_id is not None and user_id != p.user_id:
            raise Forbidden("a user token reaches its own user only", user_where)
        if p.session_id is not None and session_id is not None and session_id != p.session_id:
            raise Forbidden("this user token is bound to another session", session_where)
        user_id = p.user_id
        session_id = session_id if session_id is not None else p.session_id
    if session_id is not None:
        check_session(p, agent_id, session_id, sessions, where=session_where, humans=humans, starts=starts)
    return Reach(agent_id, user_id, session_id)


def require_agent(p: Principal, agent_id: str, what: str = "") -> None:
    """Any credential of ``agent_id``: an admin key, or a key or token of that agent."""
    if p.kind != "admin" and agent_id != p.agent_id:
        raise Forbidden(f"this credential reaches agent {p.agent_id!r} only", "path agent_id")


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
    require_agent(p, agent_id)
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
    model's tool arguments). A header contradicting a user token is refused; a connection that
    names no session gets the user's own MCP session. The connection can ``remember``, so it
    must be allowed to start its session (``api.membership``)."""
    from api.auth import SESSION_HEADER, USER_HEADER

    agent_id = p.agent_id if p.kind != "admin" else headers.get(AGENT_HEADER)
    if not agent_id:
        raise Forbidden(f"an admin key names the agent in {AGENT_HEADER}", f"header {AGENT_HEADER}")
    user_id = _header_id(headers, USER_HEADER)
    session_id = _header_id(headers, SESSION_HEADER)
    if p.kind == "user":
        reach(p, agent_id, user_id=user_id, session_id=session_id, user_where=f"header {USER_HEADER}",
              session_where=f"header {SESSION_HEADER}")
        user_id, session_id = p.user_id, session_id or p.session_id
    if not user_id:
        raise ApiError("missing header", f"header {USER_HEADER}",
                       "a key's MCP connection names its user here (set by the runtime, not the model)")
    session_id = session_id or default_session(agent_id, user_id)
    return reach(p, agent_id, user_id=user_id, session_id=session_id, user_where=f"header {USER_HEADER}",
                 session_where=f"header {SESSION_HEADER}", sessions=sessions, humans=[user_id], starts=True)


def _header_id(headers, name: str) -> str | None:
    """A connection header's id, checked as an event's id field is (422 naming the header)."""
    value = headers.get(name) or None
    if value is None:
        return None
    try:
        return _ID.validate_python(value)
    except ValidationError as exc:
        raise ApiError("invalid request", f"header {name}", exc.errors()[0]["msg"], status=422) from None
