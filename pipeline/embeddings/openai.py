"""OpenAI embeddings (``text-embedding-3-small``, 1536 dimensions): one batched call per stage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.errors import InvalidInput, TransientError
from pipeline.llm.openai import import_sdk, make_client, map_error
from schemas.settings import Settings

_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
#: the API takes at most this many inputs in one request
MAX_BATCH = 2048


class OpenAIEmbedder(Embedder):
    def __init__(self, client: Any, model: str = "text-embedding-3-small", timeout_s: float = 60.0) -> None:
        self.client = client
        self.model = model
        self.dim = _DIMS.get(model, 1536)
        self.timeout_s = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings, http_client: Any = None) -> OpenAIEmbedder:
        return cls(make_client(settings, http_client), settings.openai_embedding_model, settings.llm_timeout_s)

    def embed(self, texts: Sequence[str]) -> Embeddings:
        if not texts:
            return Embeddings(vectors=[], model=self.model, dim=self.dim)
        if len(texts) > MAX_BATCH:
            raise InvalidInput("texts", f"{len(texts)} texts in one batch; the API takes at most {MAX_BATCH}")
        openai = import_sdk()
        where = f"openai embeddings ({self.model})"
        # the API refuses empty strings; a single space embeds as "nothing said"
        inputs = [t if t.strip() else " " for t in texts]
        try:
            response = self.client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float", timeout=self.timeout_s,
            )
        except openai.OpenAIError as exc:
            mapped = map_error(exc, where)
            if mapped is None:
                raise
            raise mapped from exc
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts) or any(len(r.embedding) != self.dim for r in rows):
            raise TransientError(f"{where}: expected {len(texts)} vectors of {self.dim} dimensions, got a different shape")
        vectors = np.array([r.embedding for r in rows], dtype=np.float32)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        usage = response.usage
        return Embeddings(
            vectors=vectors.tolist(), model=self.model, dim=self.dim,
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
        )
