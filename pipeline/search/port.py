"""The fact-search port: the same scores and thresholds on every implementation (design §6).

- semantic score = (1 + cosine) / 2, the scale Atlas reports for cosine vector indexes;
- text score = BM25 (k1 1.2, b 0.75) with typo-tolerant term matching;
- both are pre-filtered inside the search to ``agent_id`` + ``scope_keys`` (+ embedding model
  for vectors), retired facts excluded, and to ``having`` when given: label groups
  (``pipeline.search.filters.MemoryFilter.groups``) of which a fact holds a label of each.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    fact_id: str
    score: float


class FactSearch(abc.ABC):
    @abc.abstractmethod
    def semantic(
        self, agent_id: str, scope_keys: Sequence[str], embedding_model: str,
        vector: Sequence[float], limit: int, min_score: float | None, *, having: Sequence[Sequence[str]] = (),
    ) -> list[Hit]:
        """Best first; ``min_score`` None means no threshold."""

    @abc.abstractmethod
    def text(
        self, agent_id: str, scope_keys: Sequence[str], query: str, limit: int,
        min_score: float | None, *, having: Sequence[Sequence[str]] = (),
    ) -> list[Hit]:
        """Best first; ``min_score`` None means no threshold."""
