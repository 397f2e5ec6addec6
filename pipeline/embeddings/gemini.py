"""Gemini embeddings (``gemini-embedding-001``) through ``client.models.embed_content``.

The SDK sends one ``batchEmbedContents`` request per call; the API takes at most 100 texts in
one (https://ai.google.dev/api/embeddings#method:-models.batchembedcontents), so bigger batches
go in chunks. ``MEMORY_EMBEDDING_DIMENSIONS`` goes out as ``output_dimensionality`` (the model
answers 3072 without it); vectors are normalised here, since Gemini's are unit length only at
3072. The API reports no token usage for embeddings: it is estimated.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.embeddings.port import Embeddings, NetworkEmbedder, checked_vectors
from pipeline.llm.answers import estimate_usage_tokens
from pipeline.llm.deadline import within
from pipeline.llm.gemini import import_sdk, make_client, map_error
from schemas.settings import Settings

MAX_BATCH = 100


class GeminiEmbedder(NetworkEmbedder):
    provider = "gemini"
    # https://ai.google.dev/gemini-api/docs/models#gemini-embedding: input token limit 2,048
    window = 2048

    label = "Gemini"
    connect = staticmethod(make_client)

    @staticmethod
    def own_settings(settings: Settings) -> tuple[str | None, str | None, str]:
        return settings.gemini_api_key, settings.gemini_base_url, settings.gemini_embedding_model

    def _embed(self, texts: Sequence[str]) -> Embeddings:
        where = f"gemini embeddings ({self.model})"
        inputs = [t if t.strip() else " " for t in texts]  # the API refuses empty content
        rows: list[list[float]] = []
        for start in range(0, len(inputs), MAX_BATCH):
            rows.extend(self._call(inputs[start:start + MAX_BATCH], where))
        vectors = checked_vectors(self, rows, len(texts), where)
        return Embeddings(vectors=vectors, model=self.model, dim=len(vectors[0]),
                          input_tokens=sum(estimate_usage_tokens(t) for t in texts))

    def _call(self, chunk: list[str], where: str) -> list[list[float]]:
        _, types = import_sdk()
        config = types.EmbedContentConfig(
            output_dimensionality=self.dimensions,
            http_options=types.HttpOptions(timeout=int(self.timeout_s * 1000)),
        )
        try:
            response = within(self.timeout_s, lambda: self.client.models.embed_content(
                model=self.model, contents=chunk, config=config), where=where)
        except Exception as exc:  # mapped by type; anything else propagates unchanged
            mapped = map_error(exc, where, self.timeout_s)
            if mapped is None:
                raise
            raise mapped from exc
        return [list(e.values or []) for e in (response.embeddings or [])]
