import pytest

from pipeline.embeddings import open_embedder
from pipeline.embeddings.gemini import GeminiEmbedder
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.embeddings.local import LocalEmbedder
from pipeline.embeddings.openai import OpenAIEmbedder
from schemas.settings import Settings


@pytest.mark.parametrize(
    ("settings", "expected", "model"),
    [
        (dict(openai_api_key="o"), OpenAIEmbedder, "text-embedding-3-small"),
        (dict(gemini_api_key="g"), GeminiEmbedder, "gemini-embedding-001"),
        (dict(gemini_api_key="g", openai_api_key="o"), OpenAIEmbedder, "text-embedding-3-small"),
        (dict(gemini_api_key="g", embedding_base_url="http://localhost:11434/v1",
              openai_embedding_model="nomic-embed-text"), OpenAIEmbedder, "nomic-embed-text"),
        (dict(), LocalEmbedder, "all-MiniLM-L6-v2-int8"),
        (dict(embedding_provider="local", openai_api_key="o"), LocalEmbedder, "all-MiniLM-L6-v2-int8"),
        (dict(embedding_provider="gemini", gemini_api_key="g", openai_api_key="o"), GeminiEmbedder,
         "gemini-embedding-001"),
        (dict(embedding_provider="hashing", openai_api_key="o"), HashingEmbedder, "hashing-384"),
        (dict(embedding_provider="hashing", hashing_embedding_dim=64), HashingEmbedder, "hashing-64"),
    ],
    ids=["openai-key", "gemini-only", "both-keys-openai", "own-embedding-server", "no-key-local",
         "explicit-local", "explicit-gemini", "explicit-hashing", "hashing-dim"],
)
def test_the_embedder_is_the_explicit_setting_else_openai_then_gemini_then_local(settings, expected, model):
    embedder = open_embedder(Settings(**{"openai_api_key": None, "gemini_api_key": None, **settings}))
    assert type(embedder) is expected and embedder.model == model
