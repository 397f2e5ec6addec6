"""Small factories of stored documents for store tests (whole-second times: BSON keeps ms)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pipeline.text import text_hash
from schemas.documents import Fact, FormationRun, Reflection, StoredMessage, scope_key

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(seconds: float = 0) -> datetime:
    return T0 + timedelta(seconds=seconds)


def message(
    n: int, *, session: str = "s1", agent: str = "a1", user: str = "u1", role: str = "user",
    content: str | None = None, created: datetime | None = None, tokens: float = 10.0,
    users: list[str] | None = None, tier: int = 0, preview: bool = False, event_id: str | None = None,
) -> StoredMessage:
    return StoredMessage(
        agent_id=agent, session_id=session, message_id=f"m{n}", event_id=event_id or f"{session}-e{n}",
        role=role, sender_id=user if role == "user" else None, content=content or f"message {n} of {session}",
        created_at=created or at(n), ingested_at=at(n), weighted_tokens=tokens,
        session_users=[user] if users is None else users, user_tier=tier, preview=preview,
    )


def run(run_id: str = "r1", *, session: str = "s1", agent: str = "a1", reason: str = "threshold",
        created: datetime | None = None) -> FormationRun:
    """A run as a caller hands it to ``try_claim`` (the store fills in the range)."""
    return FormationRun(
        run_id=run_id, agent_id=agent, session_id=session, seq_from=0, seq_to=0, reason=reason,
        created_at=created or T0,
    )


def fact(
    fact_id: str, content: str, *, agent: str = "a1", user: str | None = None,
    embedding: list[float] | None = None, model: str | None = "m1", formed: datetime | None = None,
    session: str | None = "s1",
) -> Fact:
    scope = "user" if user else "agent"
    return Fact(
        fact_id=fact_id, agent_id=agent, scope=scope, user_id=user,
        scope_key=scope_key(scope, user_id=user), content=content, hash=text_hash(content),
        embedding=embedding, embedding_model=model if embedding is not None else None,
        source_session_id=session, formed_at=formed or T0,
    )


def reflection(
    reflection_id: str, content: str, *, scope: str = "user", agent: str = "a1", user: str | None = "u1",
    session: str | None = "s1", formed: datetime | None = None,
) -> Reflection:
    key = scope_key(scope, user_id=user, session_id=session)
    return Reflection(
        reflection_id=reflection_id, agent_id=agent, scope=scope,
        user_id=user if scope == "user" else None, session_id=session if scope == "session" else None,
        scope_key=key, content=content, source_session_id=session, formed_at=formed or T0,
    )
