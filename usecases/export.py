"""A person's data on request (design §12 ``export-user``): everything stored about a user
as JSON Lines, read through the store's provenance queries only (``pipeline.export``: their
messages, the facts and reflections resting on them with history, the blob sections that
absorbed them, their runs' costs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipeline import export
from pipeline.store.port import Store
from schemas.access import subject_digest
from usecases.audit import Audited


@dataclass(frozen=True)
class Export:
    """The lines, read as they are streamed, and the audit entry the export makes; the file
    name a download may carry names the user by pseudonym only."""
    user_id: str
    agent_id: str | None
    lines: Iterator[str]

    @property
    def audit(self) -> Audited:
        return Audited("export_user", self.agent_id, subject_digest(self.agent_id, self.user_id))

    @property
    def file_name(self) -> str:
        return f"export-{subject_digest(self.agent_id, self.user_id)[:12]}.jsonl"


def records(store: Store, user_id: str, agent_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Everything stored about ``user_id`` (under ``agent_id``, or every agent), one record
    each, read as they are consumed."""
    return export.export_user(store, user_id, agent_id)


def export_user(store: Store, user_id: str, agent_id: str | None = None) -> Export:
    """The records as JSON Lines, one JSON object per line."""
    found = records(store, user_id, agent_id)
    return Export(user_id, agent_id, (json.dumps(r, default=str, sort_keys=True) + "\n" for r in found))
