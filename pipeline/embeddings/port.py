"""The embedder port: one batched call per stage, unit-length vectors, a named model."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]
    model: str
    dim: int
    input_tokens: int = 0


class Embedder(abc.ABC):
    #: recorded on every fact; facts of different models are never compared
    model: str
    dim: int

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed a batch in one call. Vectors are L2-normalised."""
