"""One stored item by its id, for the inspector's pages (design §12): a fact with its
timeline, a session with its messages. The reach check stays with the door; these say only
whether the item is stored. A write into a session's memory checks here that the session is the
agent's (``known_session``), so no buffer or blob is made for a session that never was."""

from __future__ import annotations

from pipeline.errors import NotStored
from pipeline.store.port import IngestStore, Store
from schemas.documents import Fact, SessionState


def fact(store: Store, fact_id: str) -> Fact | None:
    """The fact, live or retired, or None (erased, or never stored)."""
    return next(iter(store.facts.get_facts([fact_id])), None)


def session(store: Store, session_id: str) -> SessionState | None:
    return store.ingest.get_session(session_id)


#: how every door words a session it does not hold (the inspector's session page too)
NO_SESSION = "no such session (erased, or never stored)"


def known_session(ingest: IngestStore, agent_id: str, session_id: str, where: str = "session_id") -> SessionState:
    """The agent's session ``session_id``; ``NotStored`` naming ``where`` when the agent has
    none of that id (another agent's is none of its own)."""
    found = ingest.get_session(session_id)
    if found is None or found.agent_id != agent_id:
        raise NotStored(where, f"{NO_SESSION}: {session_id!r} is not a session of agent {agent_id!r}")
    return found
