"""What one (agent, session, user) may see, read from the store (design §1, §11).

The rule itself is pure (``pipeline.context.visibility``); this is the one place that reads its
inputs: the agent's toggles, the session's humans as stored and the user's own switch. Both
reads, the memory context and ``search_facts``, take their view from here, once per call, so
every process that shares the store decides alike from the first message on.
"""

from __future__ import annotations

from typing import Protocol

from pipeline.context import Visibility, visibility
from pipeline.store.port import AccessStore, IngestStore
from schemas.settings import Settings


class ViewReads(Protocol):
    """What a view is decided from: the agent's settings and the session (ingest), and the
    users who switched their memory off (access)."""

    ingest: IngestStore
    access: AccessStore


def read_visibility(
    store: ViewReads, settings: Settings, agent_id: str, *, session_id: str, user_id: str | None,
) -> Visibility:
    """The scopes ``user_id`` may see in ``session_id`` of ``agent_id``: toggles, the group-chat
    rule over the session's stored humans, and the user's own switch of user memory (§12)."""
    session = store.ingest.get_session(session_id)
    return visibility(
        settings, store.ingest.get_agent_settings(agent_id), session_id=session_id, user_id=user_id,
        session_users=session.users if session else (),
        user_memory_on=not (user_id and store.access.user_memory_off(agent_id, [user_id])),
    )
