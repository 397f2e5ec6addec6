"""OpenAI (or OpenAI-compatible) embeddings: one batched call per stage.

The dimension is never looked up in a table: it is ``MEMORY_EMBEDDING_DIMENSIONS`` when set
(sent as ``dimensions`` to the models that take it, OpenAI's text-embedding-3 family, and
checked against every other server's answer), else learned from the first answer. ``dim`` asks
the server once when nothing was embedded yet (``memoryctl create-indexes`` reads it to size
the Atlas vector index).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.embeddings.port import Embeddings, NetworkEmbedder, checked_vectors
from pipeline.errors import InvalidInput
from pipeline.llm.deadline import within
from pipeline.llm.openai import import_sdk, make_client, map_error
from schemas.settings import Settings

#: the API takes at most this many inputs in one request
MAX_BATCH = 2048
# https://platform.openai.com/docs/api-reference/embeddings/create: "dimensions ... Only
# supported in text-embedding-3 and later models"
_TAKES_DIMENSIONS = ("text-embedding-3",)


class OpenAIEmbedder(NetworkEmbedder):
    provider = "openai"
    # https://platform.openai.com/docs/guides/embeddings: "max input 8192 tokens" (8191 read)
    window = 8191

    label = "OpenAI"
    connect = staticmethod(make_client)

    @staticmethod
    def own_settings(settings: Settings) -> tuple[str | None, str | None, str]:
        return settings.openai_api_key, settings.openai_base_url, settings.openai_embedding_model

    def _embed(self, texts: Sequence[str]) -> Embeddings:
        if len(texts) > MAX_BATCH:
            raise InvalidInput("texts", f"{len(texts)} texts in one batch; the API takes at most {MAX_BATCH}")
        openai = import_sdk()
        where = f"openai embeddings ({self.model})"
        # the API refuses empty strings; a single space embeds as "nothing said"
        body: dict[str, Any] = {"model": self.model, "input": [t if t.strip() else " " for t in texts],
                                "encoding_format": "float"}
        if self.dimensions is not None and self.model.startswith(_TAKES_DIMENSIONS):
            body["dimensions"] = self.dimensions
        try:
            response = within(self.timeout_s, lambda: self.client.embeddings.create(**body, timeout=self.timeout_s),
                              where=where)
        except openai.OpenAIError as exc:
            mapped = map_error(exc, where, self.timeout_s)
            if mapped is None:
                raise
            raise mapped from exc
        rows = sorted(response.data, key=lambda d: d.index)
        vectors = checked_vectors(self, [r.embedding for r in rows], len(texts), where)
        usage = response.usage
        return Embeddings(
            vectors=vectors, model=self.model, dim=len(vectors[0]),
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
        )
