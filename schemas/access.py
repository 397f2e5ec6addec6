"""Stored documents of access control (design §12 "Interfaces"): API keys, the audit log,
queued jobs and each user's own memory switch per agent.

None of them holds content: a key is kept as the SHA-256 digest of its secret, an audit
entry names who (a credential id), when, what kind and a digest of the subject, never text.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

KeyKind = Literal["admin", "agent"]
#: what an agent key may do (design §13 "Owner controls"): the runtime's key reads and
#: publishes; curation (instructions, pause, edits of agent memory) is a scope of its own
KeyScope = Literal["read", "publish", "curate"]
KEY_SCOPES: tuple[KeyScope, ...] = ("read", "publish", "curate")
RUNTIME_SCOPES: tuple[KeyScope, ...] = ("read", "publish")
JobStatus = Literal["queued", "running", "done", "failed"]
AuditAction = Literal[
    "key.create", "key.revoke", "forget_user", "export_user", "item.edit", "item.delete", "item.withdraw",
    "user_memory.switch", "replay_failed",
    "item.add", "import",
    "webhook.create", "webhook.delete", "webhook.rotate", "webhook.enable", "webhook.redeliver",
    "instructions.set", "instructions.clear", "instructions.rollback",
    "memory.pause", "memory.resume", "blob.edit", "blob.replace",
    "caps.set", "cap.reached", "categories.set", "categories.rollback", "metadata_keys.set",
]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ApiKey(_Doc):
    """An admin key (every agent, every scope) or an agent key (one agent, its ``scopes``)."""

    key_id: str
    kind: KeyKind
    agent_id: str | None = None       # set for agent keys only
    #: what an agent key may do; a key stored before scopes existed reads and publishes, as then
    scopes: list[KeyScope] = Field(default_factory=lambda: list(RUNTIME_SCOPES))
    digest: str                       # SHA-256 hex of the secret; the secret itself is never kept
    label: str | None = None
    created_at: datetime
    revoked_at: datetime | None = None


class AuditEntry(_Doc):
    audit_id: str
    at: datetime
    credential_id: str                # key id or token id: who
    credential_kind: str              # admin, agent or user
    action: AuditAction
    agent_id: str | None = None
    #: a digest of the user (or key id, run count...) acted on, so entries about one person can
    #: be found without the audit log holding their id after they are forgotten
    subject: str | None = None
    outcome: Literal["ok", "refused", "queued", "failed"] = "ok"
    counts: dict[str, int] = Field(default_factory=dict)


class Job(_Doc):
    """Work queued on the maintenance queue for a caller who polls its status (a forget that
    rebuilds blobs with the LLM). ``user_id`` is cleared once the job ends: the job record
    must not outlive the erasure as a trace of the person."""

    job_id: str
    kind: Literal["forget_user"]
    status: JobStatus = "queued"
    agent_id: str | None = None       # None: every agent
    user_id: str | None = None
    subject: str                      # ``subject_digest`` of the user: who may poll it
    requested_by: str = ""            # the credential id that asked (the audit's who)
    requested_kind: str = ""
    created_at: datetime
    sent_at: datetime | None = None   # last handed to the maintenance queue (None: at created_at)
    finished_at: datetime | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


def subject_digest(agent_id: str | None, user_id: str) -> str:
    """A stable pseudonym of (agent, user) for audit entries and job ownership."""
    return hashlib.sha256(f"{agent_id or '*'}\x1f{user_id}".encode()).hexdigest()[:24]


def key_digest(secret: str) -> str:
    """What is stored of a key: random keys of 256 bits need no slow KDF, and a check costs
    microseconds."""
    return hashlib.sha256(secret.encode()).hexdigest()
