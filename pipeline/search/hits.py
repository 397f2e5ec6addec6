"""What ``search_facts`` finds (design §6), typed from ``pipeline.retrieval`` to every door.

The hits are ``schemas.hits.SearchHit``, the very model the HTTP API answers with; only the
in-process facade's documented dict form is written here, by ``documented``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.hits import SearchHit


class Found(BaseModel):
    """A ``search_facts`` answer: the hits best first, and with ``debug`` every stage's
    timings, thresholds and per-branch scores."""

    model_config = ConfigDict(frozen=True)

    hits: list[SearchHit]
    debug: dict[str, Any] | None = None

    def documented(self) -> list[dict[str, Any]] | dict[str, Any]:
        """The documented shape: the list of results, or ``{"results": [...], "debug": {...}}``
        when debug output was asked for."""
        results = [hit.as_result() for hit in self.hits]
        return results if self.debug is None else {"results": results, "debug": self.debug}
