"""Conversations for the reliability scenarios: sessions whose messages the offline rules turn
into user and agent facts, and agent, user and session reflections. Users recur across
sessions (so user scopes consolidate across runs), and some sessions are group chats."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any

CITIES = ("Lisbon", "Berlin", "Osaka", "Nairobi", "Quito", "Oslo", "Hanoi", "Perth")
PROJECTS = ("Mars Festival", "Orion launch", "Harbor cleanup", "Atlas rewrite", "Nova fundraiser")
NAMES = ("Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena")

USER_LINES = (
    "My email is {user_lower}.{n}@example.com and my phone number is +351 91{n:04d}.",
    "I moved to {city} in March {year} and I work as a nurse at {city} General Hospital.",
    "Please always answer me in short bullet points, and I prefer answers in Spanish.",
    "The {project} budget is ${budget},000 and it takes place on {day} May {year}.",
    "We decided to launch the {project} in {city} on {day} June {year}; Dana leads the venue team.",
    "Can you help me draft the invitation email for the {project} volunteers today?",
    "My daughter {other} starts school in {city} on {day} September {year}.",
    "I am allergic to peanuts, so never suggest recipes with peanuts.",
)
ASSISTANT_LINES = (
    "Noted. I will keep answers short and in bullet points.",
    "Thanks, {user}. I have the {project} details.",
    "Here is a first draft of the invitation for the {project}.",
)


def session_events(
    rng: random.Random, *, agent_id: str, session_id: str, users: list[str], messages: int,
    start: datetime | None = None, tag: str = "", injections: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """``message.added`` events of one session (user and assistant turns), in order; with
    ``injections``, every other user turn is one of them (prompt-injection text)."""
    start = start or datetime(2026, 3, 1, tzinfo=timezone.utc)
    out = []
    for n in range(messages):
        speaker = users[n % len(users)] if n % 2 == 0 else None
        fill = {
            "user": speaker or users[0], "user_lower": (speaker or users[0]).lower(), "n": rng.randrange(10**4),
            "city": rng.choice(CITIES), "year": rng.choice((2019, 2021, 2023, 2024)), "project": rng.choice(PROJECTS),
            "budget": rng.choice((20, 35, 50, 80)), "day": rng.randint(1, 28), "other": rng.choice(NAMES),
        }
        if speaker and injections and n % 4 == 2:
            role, content = "user", rng.choice(injections)
        elif speaker:
            # every session opens with the user's contact line: a user met again under the same
            # agent brings dedup candidates, hence decide_facts calls
            line = USER_LINES[0] if n == 0 else rng.choice(USER_LINES)
            role, content = "user", line.format(**fill)
        else:
            role, content = "assistant", rng.choice(ASSISTANT_LINES).format(**fill)
        message: dict[str, Any] = {
            "message_id": f"{session_id}-m{n}",
            "role": role,
            "content": f"{content}{tag}",
            "created_at": (start + timedelta(seconds=30 * n)).isoformat(),
        }
        if speaker:
            message.update(sender_id=speaker, sender_name=speaker)
        out.append({
            "type": "message.added", "schema_version": 1, "event_id": f"{session_id}-e{n}",
            "agent_id": agent_id, "agent_name": "Ada", "session_id": session_id, "message": message,
            "session_users": list(users),
        })
    return out


def end_event(agent_id: str, session_id: str) -> dict[str, Any]:
    return {"type": "session.ended", "schema_version": 1, "event_id": f"{session_id}-end",
            "agent_id": agent_id, "session_id": session_id}


def plan_sessions(rng: random.Random, count: int, *, agents: int = 2, group_every: int = 5, prefix: str = "s") -> list[dict]:
    """Who talks in each session: recurring users, every ``group_every``-th a group chat."""
    pool = list(NAMES[: max(3, count // 3)])
    out = []
    for i in range(count):
        users = [rng.choice(pool)]
        if group_every and i % group_every == group_every - 1:
            users.append(rng.choice([u for u in pool if u != users[0]]))
        out.append({"agent_id": f"agent-{i % agents}", "session_id": f"{prefix}-{i:03d}", "users": users})
    return out
