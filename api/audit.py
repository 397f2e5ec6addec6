"""The audit log (design §12): erasures, edits, exports, key changes, switches and replays,
each as who (a credential id), when, what kind and a pseudonym of the subject, never content.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from pipeline.store.ports.access import AccessStore
from schemas.access import AuditEntry


def audit(store: AccessStore, now: datetime, credential_id: str, credential_kind: str, action: str, *,
          agent_id: str | None = None, subject: str | None = None, outcome: str = "ok",
          counts: dict[str, int] | None = None) -> AuditEntry:
    """Record who did what kind of thing when: never content (``schemas.access.AuditEntry``)."""
    entry = AuditEntry(audit_id=uuid.uuid4().hex, at=now, credential_id=credential_id,
                       credential_kind=credential_kind, action=action, agent_id=agent_id, subject=subject,
                       outcome=outcome, counts=counts or {})
    store.access.record_audit(entry)
    return entry
