"""The audit log (design §12): erasures, edits, exports, key changes, switches and replays,
each as who (a credential id), when, what kind and a pseudonym of the subject, never content.

A use case's result names what it did (``Audited``: the action, the agent, the subject's
pseudonym, counts); the door says who asked (``Actor``) and ``record`` writes the entry, the
one place an entry is made, so REST, MCP, the inspector and the CLI audit alike.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, TypeVar

from pipeline.store.ports.access import AccessStore
from schemas.access import AuditAction, AuditEntry


@dataclass(frozen=True)
class Actor:
    """Who asked: a credential's id and kind (``admin``, ``agent``, ``user``, ``cli``)."""
    credential_id: str
    kind: str


#: the operator at a terminal (``memoryctl``): no credential, the entries say ``cli``
CLI = Actor("cli", "cli")


@dataclass(frozen=True)
class Audited:
    """What a use case did, as the audit log keeps it: never content, the subject a pseudonym."""
    action: AuditAction
    agent_id: str | None = None
    subject: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    outcome: Literal["ok", "refused", "queued", "failed"] = "ok"


class HasAudit(Protocol):
    @property
    def audit(self) -> Audited: ...


R = TypeVar("R", bound=HasAudit)


def record(access: AccessStore, now: datetime, actor: Actor, done: Audited, *,
           audit_id: str | None = None) -> AuditEntry:
    """Record who did what kind of thing when: never content (``schemas.access.AuditEntry``).
    ``audit_id``: for an entry a retry may write again (one entry however often)."""
    entry = AuditEntry(audit_id=audit_id or uuid.uuid4().hex, at=now, credential_id=actor.credential_id,
                       credential_kind=actor.kind, action=done.action, agent_id=done.agent_id,
                       subject=done.subject, outcome=done.outcome, counts=dict(done.counts))
    access.record_audit(entry)
    return entry


def recorded(access: AccessStore, now: datetime, actor: Actor, result: R) -> R:
    """Record the entry a use case's ``result`` names, under ``actor``; ``result`` back, so a
    door writes ``recorded(..., use_case(...))`` and never spells an entry out itself."""
    record(access, now, actor, result.audit)
    return result


def read_log(access: AccessStore, *, since: datetime | None = None, action: str | None = None,
             limit: int = 100) -> list[AuditEntry]:
    """The log, newest first (``memoryctl audit``, ``/v1/admin/audit``)."""
    return access.list_audit(since=since, action=action, limit=limit)
