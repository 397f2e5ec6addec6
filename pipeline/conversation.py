"""Messages -> the role-labelled conversation text an LLM reads (design §5.1). Pure.

One line per message, oldest first::

    [2026-01-03 14:05] Alice (user): I'm moving to Denver in May.
    [2026-01-03 14:06] Assistant (Mars Bot): Congratulations! ...

Names come from the events (``sender_name``, ``agent_name``); a user without a name is shown
by id. Continuation lines of a multi-line message are indented, so no message text can pass
itself off as the header of another message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from schemas.documents import StoredMessage

_ROLE_LABEL = {"assistant": "Assistant", "tool": "Tool", "system": "System"}


def _timestamp(value: datetime) -> str:
    aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return aware.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")


def _one_line(value: str) -> str:
    return " ".join(value.split())


def ordered(messages: Iterable[StoredMessage]) -> list[StoredMessage]:
    """Messages by ``created_at``; ties keep ingest order (``seq``), then message id."""
    return sorted(
        messages,
        key=lambda m: (_timestamp_key(m.created_at), m.seq if m.seq is not None else -1, m.message_id),
    )


def _timestamp_key(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def known_name(message: StoredMessage, user_names: Mapping[str, str] | None = None) -> str | None:
    """The name of the human who wrote ``message`` (the event's, else the map's), if any."""
    if message.sender_name and message.sender_name.strip():
        return _one_line(message.sender_name)
    if message.sender_id and user_names and (user_names.get(message.sender_id) or "").strip():
        return _one_line(user_names[message.sender_id])
    return None


def user_name(message: StoredMessage, user_names: Mapping[str, str] | None = None) -> str:
    """The display name of the human who wrote ``message``: its known name, else its id."""
    return known_name(message, user_names) or message.sender_id or "unknown user"


def speaker(message: StoredMessage, user_names: Mapping[str, str] | None = None) -> str:
    """The label of one message's author, e.g. ``Alice (user)`` or ``Assistant (Mars Bot)``."""
    if message.role == "user":
        return f"{user_name(message, user_names)} (user)"
    label = _ROLE_LABEL.get(message.role, message.role.capitalize() or "Unknown")
    name = message.agent_name if message.role == "assistant" else message.sender_name
    if name and name.strip():
        return f"{label} ({_one_line(name)})"
    return label


def render_conversation(
    messages: Iterable[StoredMessage], user_names: Mapping[str, str] | None = None
) -> str:
    """The conversation text of ``messages``, one role-labelled, timestamped line each."""
    lines: list[str] = []
    for message in ordered(messages):
        body = message.content.strip().splitlines() or [""]
        first, rest = body[0], body[1:]
        lines.append(f"[{_timestamp(message.created_at)}] {speaker(message, user_names)}: {first}".rstrip())
        lines.extend(f"    {line}".rstrip() for line in rest)
    return "\n".join(lines)


def humans(messages: Iterable[StoredMessage]) -> list[str]:
    """The humans of the conversation: every declared session user and every user sender."""
    seen: dict[str, None] = {}
    for message in messages:
        for user_id in message.session_users:
            seen.setdefault(user_id, None)
        if message.role == "user" and message.sender_id:
            seen.setdefault(message.sender_id, None)
    return list(seen)


def is_group_chat(messages: Iterable[StoredMessage]) -> bool:
    """More than one human in the session: no user-scoped memory is formed (design §1)."""
    return len(humans(messages)) > 1


def message_inputs(
    messages: Iterable[StoredMessage], user_names: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The structured form of the messages that offline and scripted providers read."""
    return [
        {
            "message_id": m.message_id,
            "role": m.role,
            "sender_id": m.sender_id,
            "sender_name": known_name(m, user_names) if m.role == "user" else (m.agent_name or m.sender_name),
            "content": m.content,
            "created_at": _timestamp_key(m.created_at).astimezone(timezone.utc).isoformat(),
        }
        for m in ordered(messages)
    ]
