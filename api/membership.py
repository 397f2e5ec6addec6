"""Who may use a session (design §12 "Sessions belong to their people"): the one rule that REST, MCP and
the inspector apply, through ``api.access.reach``; no door decides it alone.

A session's humans are set by the platform (an agent or admin key: ``start``'s ``user_ids``,
a publish's ``session_users`` and user senders, the ``X-Memory-User`` of a key's MCP
connection), or, for a session a user starts alone with their own token, by that user. So:

- a user token reaches a stored session only if its user is one of that session's humans and
  the session is its agent's; it never joins one;
- a user token starts (publishes into) an unstored session only if the id is bound to it
  already: its own MCP session ``mcp:<agent>:<user>`` (``pipeline.own_session``), or the
  session its token names (the platform chose that id for this user when it minted the
  token). Any other id could later be used by the platform for other people, so claiming
  it is refused. Reading an unstored session reads nothing of anyone and is allowed;
- under the reserved ``mcp:`` prefix, the only human there can be is the user whose own
  session it is, whoever asks (an agent key too): nobody else can hold it.

Because the ids a user may start are fixed by the id itself or by the token, every process
agrees without a shared claim, and nothing can change between this check and the ingest.
"""

from __future__ import annotations

from collections.abc import Iterable

from api.auth import Principal
from api.errors import Forbidden
from pipeline.own_session import default_session, is_reserved, stranger_reason, strangers


def check_session(p: Principal, agent_id: str, session_id: str, sessions, *, where: str,
                  humans: Iterable[str] = (), starts: bool = False) -> None:
    """Refuse (``Forbidden`` at ``where``) unless ``p`` may use ``session_id`` of ``agent_id``.
    ``humans``: the people a key's request declares for it; ``starts``: the request may
    create the session (a publish, an MCP connection that can ``remember``). ``sessions``
    is the store (its ``ingest.get_session``)."""
    declared = [p.user_id] if p.kind == "user" else list(humans)
    found = strangers(agent_id, session_id, declared)
    if found:
        why = ("this is another user's own MCP session" if p.kind == "user"
               else stranger_reason(session_id, found[0]))
        raise Forbidden(why, where)
    stored = sessions.ingest.get_session(session_id) if sessions is not None else None
    if stored is not None and stored.agent_id != agent_id:
        raise Forbidden(f"this session belongs to another agent, not {agent_id!r}", where)
    if p.kind != "user" or is_reserved(session_id):
        return
    if stored is not None:
        if p.user_id not in stored.users:
            raise Forbidden("this session is not one of this user's: its humans are set by the platform", where)
        return
    if starts and session_id != p.session_id:
        raise Forbidden(
            "a user token starts no session but its own MCP session "
            f"({default_session(agent_id, p.user_id)!r}) or the one its token names; "
            "the platform (an agent key) starts the others and names their humans", where)
