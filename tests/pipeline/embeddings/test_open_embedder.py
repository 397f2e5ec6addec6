import pytest

from pipeline.embeddings import open_embedder
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.embeddings.local import LocalEmbedder
from pipeline.embeddings.openai import OpenAIEmbedder
from schemas.settings import Settings


@pytest.mark.parametrize(
    ("settings", "expected", "model"),
    [
        (dict(openai_api_key="o"), OpenAIEmbedder, "text-embedding-3-small"),
        (dict(), LocalEmbedder, "all-MiniLM-L6-v2-int8"),
        (dict(embedding_provider="local", openai_api_key="o"), LocalEmbedder, "all-MiniLM-L6-v2-int8"),
        (dict(embedding_provider="hashing", openai_api_key="o"), HashingEmbedder, "hashing-384"),
        (dict(embedding_provider="hashing", hashing_embedding_dim=64), HashingEmbedder, "hashing-64"),
    ],
    ids=["openai-key", "no-key-local", "explicit-local", "explicit-hashing", "hashing-dim"],
)
def test_the_embedder_is_the_explicit_setting_else_openai_with_a_key_else_local(settings, expected, model):
    embedder = open_embedder(Settings(**{"openai_api_key": None, "gemini_api_key": None, **settings}))
    assert type(embedder) is expected and embedder.model == model
