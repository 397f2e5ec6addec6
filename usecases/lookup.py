"""One stored item by its id, for the inspector's pages (design §12): a fact with its
timeline, a session with its messages. The reach check stays with the door; these say only
whether the item is stored."""

from __future__ import annotations

from pipeline.store.port import Store
from schemas.documents import Fact, SessionState


def fact(store: Store, fact_id: str) -> Fact | None:
    """The fact, live or retired, or None (erased, or never stored)."""
    return next(iter(store.facts.get_facts([fact_id])), None)


def session(store: Store, session_id: str) -> SessionState | None:
    return store.ingest.get_session(session_id)
