"""The access port (design §12 "Interfaces"): API keys, the audit log, queued jobs and each
user's own memory switch per agent. Part of ``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from schemas.access import ApiKey, AuditEntry, Job


class AccessStore(Protocol):
    """Credentials, audit, jobs and the per-(agent, user) memory switch."""

    # ------------------------------------------------------------------ keys ---------------
    @abc.abstractmethod
    def put_api_key(self, key: ApiKey) -> None:
        """Store a new key (its digest); a second key with the same id or digest is refused
        with ``ValueError``."""

    @abc.abstractmethod
    def find_api_key(self, digest: str) -> ApiKey | None:
        """The key whose secret has this SHA-256 digest, revoked or not (one indexed read)."""

    @abc.abstractmethod
    def list_api_keys(self) -> list[ApiKey]:
        """Every key, oldest first."""

    @abc.abstractmethod
    def revoke_api_key(self, key_id: str, now: datetime) -> ApiKey | None:
        """Mark the key revoked (once: a second revoke keeps the first time). None: no such key."""

    # ------------------------------------------------------------------ audit --------------
    @abc.abstractmethod
    def record_audit(self, entry: AuditEntry) -> None: ...

    @abc.abstractmethod
    def list_audit(self, *, since: datetime | None = None, action: str | None = None,
                   limit: int = 100) -> list[AuditEntry]:
        """Entries at or after ``since`` (of one ``action``, if given), newest first."""

    # ------------------------------------------------------------------ jobs ---------------
    @abc.abstractmethod
    def put_job(self, job: Job) -> None:
        """Insert or replace the job."""

    @abc.abstractmethod
    def get_job(self, job_id: str) -> Job | None: ...

    # ------------------------------------------------------------------ user switch --------
    @abc.abstractmethod
    def set_user_memory(self, agent_id: str, user_id: str, enabled: bool, now: datetime) -> None:
        """Switch the user's own memory with this agent on or off (off: nothing new formed in
        their user scope, their user memory left out of context and search; items kept)."""

    @abc.abstractmethod
    def user_memory_off(self, agent_id: str, user_ids: Sequence[str]) -> set[str]:
        """Which of ``user_ids`` switched their user memory off with this agent."""

    @abc.abstractmethod
    def forget_user_switches(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> int:
        """Delete the user's switches (under one agent, or all): erasure leaves no row naming
        them. Returns how many went (with ``dry_run``, would go: nothing is deleted)."""
