"""The ingest port (design §7): agents, messages, sessions and rejected events.

What the ingest task and the producer side need; part of ``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from schemas.documents import AgentSettings, RejectedEvent, SessionState, StoredMessage


@dataclass(frozen=True)
class IngestOutcome:
    """What happened to one message on ingest. A rejected message (its session belongs to
    another agent) was not stored: ``session`` is None and ``reason`` says why."""

    status: Literal["accepted", "duplicate", "rejected"]
    seq: int | None
    session: SessionState | None
    reason: str | None = None


def owned_by_another(session_id: str) -> str:
    """The reason a session of another agent refuses a message, an end or a claim. It never
    names the owner."""
    return f"session {session_id} belongs to another agent"


class IngestStore(Protocol):
    """Messages in, sessions and their trigger state, agents' settings, rejected events."""

    @abc.abstractmethod
    def get_agent_settings(self, agent_id: str) -> AgentSettings:
        """The agent's toggles; an unknown agent gets the defaults of §1 (nothing is written)."""

    @abc.abstractmethod
    def put_agent_settings(self, settings: AgentSettings) -> None:
        """Register or replace an agent's settings."""

    @abc.abstractmethod
    def ingest_message(self, message: StoredMessage, now: datetime) -> IngestOutcome:
        """Store one message and update its session's trigger state, atomically.

        - A session belongs to the agent of its first message: a message of another agent
          changes nothing and returns ``status="rejected"`` with ``owned_by_another``'s reason
          (checked first, so it is never counted as a duplicate).
        - A duplicate ``event_id`` or (``session_id``, ``message_id``) changes nothing except the
          session's ``duplicates`` counter, and returns ``status="duplicate"``.
        - An accepted message gets the next per-session ``seq``; the session's ``last_seq``,
          ``messages_since``, ``tokens_since`` (by ``message.weighted_tokens``), ``users``,
          ``max_tier``, ``preview`` and ``last_activity_at`` (the max of old and ``now``) move
          with it. A message created after the session's ``ended_at`` reopens it (``ended_at``
          back to None; the end time stays in ``ended_history``). A crash half way must leave either nothing or a state that a redelivery of
          the same message completes (the message must never end up stored without a seq),
          and the session never counts a seq whose message is not stored: a claim covers only
          messages it can read.
        """

    def ingest_messages(self, messages: Sequence[StoredMessage], now: datetime) -> list[IngestOutcome]:
        """``ingest_message`` for each message in order, one outcome each: a message that
        repeats an earlier one of the same batch is a duplicate of it. Adapters may store the
        whole batch at once (atomically: all or nothing); this default stores them one by one,
        so a ``TransientError`` may leave a prefix stored (a redelivery sees it as duplicates)."""
        return [self.ingest_message(message, now) for message in messages]

    @abc.abstractmethod
    def record_rejection(self, rejected: RejectedEvent) -> None:
        """Keep a rejected event with its raw payload and structured errors."""

    @abc.abstractmethod
    def list_rejections(self, limit: int = 100) -> list[RejectedEvent]: ...

    @abc.abstractmethod
    def delete_rejections(self, rejection_ids: Sequence[str]) -> int:
        """Drop these records (their events were published again); returns how many were dropped."""

    @abc.abstractmethod
    def get_messages(self, session_id: str, seq_from: int, seq_to: int) -> list[StoredMessage]:
        """Messages with ``seq_from <= seq <= seq_to``, ordered by ``created_at`` then seq."""

    @abc.abstractmethod
    def count_messages(self, session_id: str) -> int: ...

    @abc.abstractmethod
    def get_session(self, session_id: str) -> SessionState | None: ...

    @abc.abstractmethod
    def declare_session_users(self, session_id: str, agent_id: str, user_ids: Sequence[str]) -> SessionState:
        """Merge ``user_ids`` into the session's ``users``, atomically (a set union: racing
        declarations and ingests lose no one), and return the session as it now stands. A
        session not stored yet is created for ``agent_id``, with no message: it then belongs to
        that agent, as it would to the agent of its first message. A session of another agent
        is left alone and ``InvalidInput("session_id", ...)`` is raised."""

    @abc.abstractmethod
    def mark_session_ended(self, session_id: str, now: datetime, agent_id: str | None = None) -> SessionState | None:
        """Set ``ended_at`` and append it to ``ended_history``, unless the session is ended
        already (the first end time stays); None for an unknown session. A message written after
        the end reopens the session (``ingest_message``), so a later end is recorded again. With
        ``agent_id``, a session of another agent is left alone and ``InvalidInput("session_id",
        ...)`` is raised."""

    @abc.abstractmethod
    def find_cold_sessions(self, idle_before: datetime, min_messages: int, limit: int) -> list[str]:
        """Ids of sessions idle since ``idle_before`` with ``>= min_messages`` unclaimed messages
        and no live claim. Candidates only: the claim itself re-checks atomically."""
