"""What ``search_facts`` finds (design §6), typed from ``pipeline.retrieval`` to the facade.

Times travel as datetimes and are written out once, by ``documented``, in the shape the
design documents and every caller (HTTP API, MCP, the inspector) reads: ISO 8601 strings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.documents import FactScope


class FactHit(BaseModel):
    """One fact found: the text shown, its times, its age as the agent reads it, its fused score."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    content: str
    scope: FactScope
    formed_at: datetime
    #: the latest change of the text shown (as of a past time: when that version was recorded)
    updated_at: datetime
    age: str
    score: float
    #: set on a hit searched as of a past time only: when the text shown was valid
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    #: when the fact stops being true (design §13 "Expiry"); None: no end foreseen
    expires_at: datetime | None = None

    @property
    def aged_from(self) -> datetime:
        """What ``age`` counts from: the latest change, or as of a past time the moment the
        text became valid (it may have been recorded later, by a replay)."""
        return self.valid_from or self.updated_at

    def as_result(self) -> dict[str, Any]:
        """``{id, content, scope, formed_at, updated_at, age, score}`` with ISO times; a hit
        searched as of a past time adds ``valid_from`` and ``valid_to`` (None: still valid), a
        fact that expires adds ``expires_at``."""
        out: dict[str, Any] = {"id": self.id, "content": self.content, "scope": self.scope,
                               "formed_at": self.formed_at.isoformat(), "updated_at": self.updated_at.isoformat()}
        if self.valid_from is not None:
            out["valid_from"] = self.valid_from.isoformat()
            out["valid_to"] = self.valid_to.isoformat() if self.valid_to else None
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at.isoformat()
        out["age"], out["score"] = self.age, self.score
        return out


class Found(BaseModel):
    """A ``search_facts`` answer: the hits best first, and with ``debug`` every stage's
    timings, thresholds and per-branch scores."""

    model_config = ConfigDict(frozen=True)

    hits: list[FactHit]
    debug: dict[str, Any] | None = None

    def documented(self) -> list[dict[str, Any]] | dict[str, Any]:
        """The documented shape: the list of results, or ``{"results": [...], "debug": {...}}``
        when debug output was asked for."""
        results = [hit.as_result() for hit in self.hits]
        return results if self.debug is None else {"results": results, "debug": self.debug}
