"""Embedders: OpenAI, Gemini, the offline local semantic models (MiniLM, multilingual e5), and the hashing embedder for tests."""

from __future__ import annotations

from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.errors import ConfigurationError
from schemas.settings import Settings

__all__ = ["Embedder", "Embeddings", "open_embedder"]


def open_embedder(settings: Settings) -> Embedder:
    """The embedder of ``settings.resolved_embedding_provider()``: openai, gemini, local or hashing."""
    provider = settings.resolved_embedding_provider()
    if provider == "openai":
        from pipeline.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(settings)
    if provider == "gemini":
        from pipeline.embeddings.gemini import GeminiEmbedder

        return GeminiEmbedder.from_settings(settings)
    if provider == "local" and settings.local_embedding_model == "multilingual-e5-small-q4":
        from pipeline.embeddings.e5 import E5Embedder

        return E5Embedder(settings.e5_query_threads, settings.e5_batch_threads)
    if provider == "local":
        from pipeline.embeddings.local import LocalEmbedder

        return LocalEmbedder()
    if provider == "hashing":
        from pipeline.embeddings.hashing import HashingEmbedder

        return HashingEmbedder(settings.hashing_embedding_dim)
    raise ConfigurationError(
        f"MEMORY_EMBEDDING_PROVIDER: unknown provider {provider!r} (openai, gemini, local or hashing)")
