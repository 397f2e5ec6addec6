"""When a session must form memory (design §4). Pure: no I/O, no clock of its own.

- Token estimate: characters / 4.5, weighted by role (user 1.0, tool 0.5, assistant 0.2,
  anything else 0.5).
- Threshold rule: (messages since >= 45 or weighted tokens since >= 1500) and messages since >= 4.
- Cold rule: idle for >= ``cold_after_s`` with >= 4 unformed messages.
- Session-end rule: >= 1 unformed message, no threshold.

The same rules are handed to the store as a ``ClaimRule``, which re-checks them inside its
atomic claim; ``should_form`` lets the caller skip the claim when it cannot succeed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from schemas.documents import FormationRun
from schemas.settings import Settings

CHARS_PER_TOKEN = 4.5
ROLE_WEIGHTS: dict[str, float] = {"user": 1.0, "tool": 0.5, "assistant": 0.2}
DEFAULT_ROLE_WEIGHT = 0.5
SESSION_END_MIN_MESSAGES = 1


@dataclass(frozen=True)
class ClaimRule:
    """When a claim may be taken, evaluated *inside* the store's atomic operation.

    Built here (``threshold_rule``, ``cold_rule``, ``session_end_rule``); the store only
    translates it. A claim is taken when the session has no live claim (none, or its lease expired and the run is no longer active)
    and, counted over messages after ``claimed_through``:
    - ``messages_since >= min_messages``, and
    - ``messages_since >= message_interval`` or ``tokens_since >= token_interval``
      (either may be None, meaning "no such condition", both None meaning "no threshold"), and
    - if ``idle_before`` is set, ``last_activity_at <= idle_before`` (the cold rule).
    """

    min_messages: int
    message_interval: int | None = None
    token_interval: float | None = None
    idle_before: datetime | None = None


class _MessageLike(Protocol):
    role: str
    content: str


class Counters(Protocol):
    """What the trigger reads of a session's state (``SessionState`` has these)."""

    messages_since: int
    tokens_since: float


def estimate_tokens(text: str) -> float:
    """Characters / 4.5: a provider-free estimate, good enough to pace formation."""
    return len(text) / CHARS_PER_TOKEN


def role_weight(role: str) -> float:
    return ROLE_WEIGHTS.get(role, DEFAULT_ROLE_WEIGHT)


def weighted_tokens(message: _MessageLike) -> float:
    """Estimated tokens of a message, weighted by its role."""
    return estimate_tokens(message.content) * role_weight(message.role)


def threshold_rule(settings: Settings) -> ClaimRule:
    return ClaimRule(
        min_messages=settings.min_messages_to_form,
        message_interval=settings.formation_message_interval,
        token_interval=settings.formation_token_interval,
    )


def cold_rule(settings: Settings, now: datetime) -> ClaimRule:
    """Idle since ``now - cold_after`` with at least the minimum of unformed messages."""
    return ClaimRule(
        min_messages=settings.min_messages_to_form,
        idle_before=now - timedelta(seconds=settings.cold_after_s),
    )


def session_end_rule() -> ClaimRule:
    """Whatever is unformed, at least one message, regardless of thresholds."""
    return ClaimRule(min_messages=SESSION_END_MIN_MESSAGES)


def rule_holds(
    rule: ClaimRule, counters: Counters, last_activity_at: datetime | None = None
) -> bool:
    """Evaluate a ``ClaimRule`` on counters, as the store does (minus the live-claim check)."""
    if counters.messages_since < rule.min_messages:
        return False
    thresholds = []
    if rule.message_interval is not None:
        thresholds.append(counters.messages_since >= rule.message_interval)
    if rule.token_interval is not None:
        thresholds.append(counters.tokens_since >= rule.token_interval)
    if thresholds and not any(thresholds):
        return False
    if rule.idle_before is not None:
        if last_activity_at is None or last_activity_at > rule.idle_before:
            return False
    return True


def should_form(counters: Counters, settings: Settings) -> bool:
    """The threshold rule of §4 on a session's counters since its last claim."""
    return rule_holds(threshold_rule(settings), counters)


def is_cold(counters: Counters, last_activity_at: datetime | None, settings: Settings, now: datetime) -> bool:
    """The cold rule of §4: inactive for ``cold_after_s`` with enough unformed messages."""
    return rule_holds(cold_rule(settings, now), counters, last_activity_at)


def should_form_at_session_end(counters: Counters) -> bool:
    return rule_holds(session_end_rule(), counters)


def new_run(session_id: str, agent_id: str, reason: str, now: datetime) -> FormationRun:
    """A run to be claimed; the store fills in its range, users, tier and lease."""
    return FormationRun(
        run_id=uuid.uuid4().hex,
        agent_id=agent_id,
        session_id=session_id,
        seq_from=0,
        seq_to=0,
        reason=reason,
        status="claimed",
        created_at=now,
    )
