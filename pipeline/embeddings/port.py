"""The embedder port: one batched call per stage, unit-length vectors, a named model."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from pipeline.errors import ConfigurationError, TransientError
from schemas.settings import Settings

#: what a network embedder embeds to learn its dimension before its first real call
PROBE = "dimension probe"


@dataclass(frozen=True)
class Embeddings:
    vectors: list[list[float]]
    model: str
    dim: int
    input_tokens: int = 0


class Embedder(abc.ABC):
    #: recorded on every fact; facts of different models are never compared
    model: str
    #: who answers: openai, gemini, or ``local`` / ``hashing`` (in process, costs nothing)
    provider: str = "unknown"
    #: the vector size (``create-indexes`` sizes the Atlas vector index with it); a network
    #: embedder without ``MEMORY_EMBEDDING_DIMENSIONS`` asks its provider once to learn it
    dim: int
    #: how many tokens of a text the model reads (beside its own special tokens); the rest
    #: is cut off unseen. Network models read thousands (OpenAI's 8191, Gemini's 2048).
    window: int = 2048

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's window, without the special tokens. This
        estimate (3 characters a token, on the safe side of English's 4) serves the network
        models, whose windows are far larger than any retrieval text."""
        return -(-len(text) // 3)

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed a batch of stored texts in one call. Vectors are L2-normalised."""

    def embed_queries(self, texts: Sequence[str]) -> Embeddings:
        """Embed search queries. A model trained with asymmetric prefixes (e5: ``query:``
        against ``passage:``) embeds them apart; the others as any text."""
        return self.embed(texts)


class NetworkEmbedder(Embedder):
    """An embedder behind a provider's API (OpenAI, Gemini): an SDK client, a model, an
    optional fixed dimension, and a per-call timeout. Without ``dimensions`` the first answer
    teaches the dimension (``checked_vectors``); ``dim`` asks the provider once if nothing
    was embedded yet."""

    #: how messages name the provider ("the OpenAI embedder")
    label: ClassVar[str]
    #: the provider's SDK client factory (``make_client`` of ``pipeline.llm.<provider>``)
    connect: ClassVar[Callable[..., Any]]

    @staticmethod
    @abc.abstractmethod
    def own_settings(settings: Settings) -> tuple[str | None, str | None, str]:
        """The provider's own API key, base URL and embedding model."""

    @classmethod
    def from_settings(cls, settings: Settings, http_client: Any = None) -> Self:
        """The embedder of ``settings``: ``MEMORY_EMBEDDING_API_KEY`` and ``_BASE_URL`` when
        set, else the provider's own key and URL, so one provider can embed for another's LLM."""
        api_key, base_url, model = cls.own_settings(settings)
        client = cls.connect(
            api_key=settings.embedding_api_key or api_key, base_url=settings.embedding_base_url or base_url,
            timeout_s=settings.embedding_timeout_s, http_client=http_client, what=f"the {cls.label} embedder",
        )
        return cls(client, model, dimensions=settings.embedding_dimensions, timeout_s=settings.embedding_timeout_s)

    def __init__(self, client: Any, model: str, *, dimensions: int | None = None, timeout_s: float = 30.0) -> None:
        self.client = client
        self.model = model
        self.timeout_s = timeout_s
        self.dimensions = dimensions
        self._dim: int | None = dimensions

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed a batch in one call; an empty batch calls nothing. Vectors are L2-normalised."""
        if not texts:
            return Embeddings(vectors=[], model=self.model, dim=self._dim or 0)
        return self._embed(texts)

    @abc.abstractmethod
    def _embed(self, texts: Sequence[str]) -> Embeddings:
        """The provider's call for a batch of at least one text."""

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self.embed([PROBE])
        assert self._dim is not None
        return self._dim


def checked_vectors(embedder: Any, rows: list[list[float]], expected: int, where: str) -> list[list[float]]:
    """Unit-length vectors of one dimension; the first answer teaches ``embedder._dim``."""
    if len(rows) != expected or not rows:
        raise TransientError(f"{where}: expected {expected} vectors, got {len(rows)}")
    sizes = {len(r) for r in rows}
    if len(sizes) != 1:
        raise TransientError(f"{where}: the vectors of one answer differ in length ({sorted(sizes)})")
    size = sizes.pop()
    if embedder._dim is None:
        embedder._dim = size
    elif size != embedder._dim:
        source = "MEMORY_EMBEDDING_DIMENSIONS" if embedder.dimensions is not None else "its first answer"
        raise ConfigurationError(
            f"{where}: the model answers {size}-dimension vectors but {embedder._dim} are expected "
            f"(from {source}); set MEMORY_EMBEDDING_DIMENSIONS to what the model gives"
        )
    vectors = np.array(rows, dtype=np.float32)
    vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    return vectors.tolist()
