"""A small message factory shared by the prompt builder tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schemas.documents import StoredMessage

T0 = datetime(2026, 1, 3, 14, 5, tzinfo=timezone.utc)


def _message(i: int, role: str, content: str, *, sender_id: str | None = None, sender_name: str | None = None,
             users: list[str] | None = None) -> StoredMessage:
    return StoredMessage(
        agent_id="a1", session_id="s1", message_id=f"m{i}", event_id=f"e{i}", seq=i, role=role,
        sender_id=sender_id, sender_name=sender_name, content=content,
        created_at=T0 + timedelta(minutes=i), ingested_at=T0, agent_name="Mars Bot" if role == "assistant" else None,
        session_users=users if users is not None else ([sender_id] if sender_id else []),
    )


@pytest.fixture
def one_to_one() -> list[StoredMessage]:
    return [
        _message(1, "user", "Hi, I'm Alice. My email is alice@example.com.", sender_id="u1", sender_name="Alice"),
        _message(2, "assistant", "Nice to meet you, Alice!"),
        _message(3, "user", "I prefer short answers.", sender_id="u1", sender_name="Alice"),
    ]


@pytest.fixture
def group_chat() -> list[StoredMessage]:
    return [
        _message(1, "user", "The Mars Festival budget is $50,000.", sender_id="u1", sender_name="Alice",
                 users=["u1", "u2"]),
        _message(2, "user", "I live in Tucson.", sender_id="u2", sender_name="Bob", users=["u1", "u2"]),
    ]
