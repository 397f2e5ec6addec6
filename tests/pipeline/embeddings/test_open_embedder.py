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


@pytest.mark.parametrize(
    ("settings", "size"),
    [(dict(openai_embedding_model="nomic-embed-text"), 768), (dict(), 1536), (dict(embedding_dimensions=512), 512)],
    ids=["other-model-learned", "openai-learned", "from-setting"],
)
def test_the_atlas_vector_index_is_sized_by_the_embedders_real_dimension(llm_server, settings, size):
    from pipeline.search.atlas import vector_index_definition

    embedder = open_embedder(Settings(**{"openai_api_key": llm_server.openai_key, "gemini_api_key": None,
                                         "openai_base_url": llm_server.openai_base_url, **settings}))
    field = vector_index_definition(embedder.dim)["definition"]["fields"][0]
    assert field["numDimensions"] == size


def test_a_gemini_only_deployment_sizes_its_index_by_gemini_embeddings(llm_server):
    from pipeline.search.atlas import vector_index_definition

    embedder = open_embedder(Settings(openai_api_key=None, gemini_api_key=llm_server.gemini_key,
                                      gemini_base_url=llm_server.url))
    assert vector_index_definition(embedder.dim)["definition"]["fields"][0]["numDimensions"] == 3072
