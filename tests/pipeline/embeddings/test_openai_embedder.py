"""The OpenAI embedder, with the real ``openai`` client, against a local server that speaks the
Embeddings wire format and refuses what the API refuses."""

import numpy as np
import pytest

from pipeline.embeddings.openai import OpenAIEmbedder
from pipeline.errors import ConfigurationError, PermanentError, RateLimited, TransientError
from schemas.settings import Settings
from testkit import llm_wire
from testkit.llm_server import INSUFFICIENT_QUOTA, Error, LLMServer, Stall, rate_limited


def _embedder(server, **kw):
    base = dict(openai_api_key=server.openai_key, gemini_api_key=None, openai_base_url=server.openai_base_url)
    return OpenAIEmbedder.from_settings(Settings(**{**base, **kw}))


def test_one_batched_request_carries_the_model_and_every_text(llm_server):
    result = _embedder(llm_server).embed(["Alice lives in Berlin.", "", "Bob is a nurse."])
    (body,) = llm_server.bodies("/v1/embeddings")
    assert body["model"] == "text-embedding-3-small" and body["encoding_format"] == "float"
    assert body["input"] == ["Alice lives in Berlin.", " ", "Bob is a nurse."]   # the API refuses ""
    assert "dimensions" not in body
    assert (result.model, result.dim, result.input_tokens) == ("text-embedding-3-small", 1536, 8)


def test_vectors_come_back_in_input_order_and_unit_length(llm_server):
    # the server answers rows in reverse order, as the API is free to
    texts = ["a", "b", "c"]
    vectors = np.array(_embedder(llm_server).embed(texts).vectors)
    assert vectors.shape == (3, 1536) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    for row, text in zip(vectors, texts, strict=True):
        expected = np.array(llm_wire.vector(text, 1536))
        assert np.allclose(row, expected / np.linalg.norm(expected), atol=1e-5)


def test_the_dimension_setting_is_sent_to_models_that_take_it(llm_server):
    embedder = _embedder(llm_server, embedding_dimensions=256)
    assert embedder.dim == 256 and llm_server.requests == []   # known without asking
    assert embedder.embed(["x"]).dim == 256
    assert llm_server.bodies("/v1/embeddings")[0]["dimensions"] == 256


def test_another_models_dimension_is_learned_from_its_first_answer_never_1536(llm_server):
    # e.g. nomic-embed-text on Ollama answers 768 dimensions
    embedder = _embedder(llm_server, openai_embedding_model="nomic-embed-text")
    assert embedder.dim == 768 and len(llm_server.requests) == 1
    assert embedder.embed(["x", "y"]).dim == 768
    assert "dimensions" not in llm_server.bodies("/v1/embeddings")[-1]


def test_a_dimension_setting_the_model_does_not_give_is_a_configuration_error(llm_server):
    with pytest.raises(ConfigurationError, match=r"answers 768-dimension vectors but 1024 are expected"):
        _embedder(llm_server, openai_embedding_model="nomic-embed-text", embedding_dimensions=1024).embed(["x"])


def test_the_embedder_has_its_own_server_and_key():
    with LLMServer(openai_key="sk-llm") as llm, LLMServer(openai_key="sk-embed") as embed:
        embedder = _embedder(llm, embedding_base_url=embed.openai_base_url, embedding_api_key="sk-embed")
        embedder.embed(["x"])
        assert llm.requests == [] and len(embed.requests) == 1


def test_an_empty_batch_makes_no_call(llm_server):
    assert _embedder(llm_server).embed([]).vectors == [] and llm_server.requests == []


def test_a_429_is_rate_limited_with_its_retry_after(llm_server):
    llm_server.script("embed", rate_limited("4"))
    with pytest.raises(RateLimited) as caught:
        _embedder(llm_server).embed(["a"])
    assert caught.value.retry_after == 4.0


def test_an_exhausted_quota_is_permanent(llm_server):
    llm_server.script("embed", INSUFFICIENT_QUOTA)
    with pytest.raises(PermanentError, match="billing"):
        _embedder(llm_server).embed(["a"])


@pytest.mark.parametrize(("status", "error"), [(500, TransientError), (401, PermanentError), (400, PermanentError)])
def test_http_errors_map_onto_the_error_tree(llm_server, status, error):
    llm_server.script("embed", Error.of(llm_wire.openai_error(status, "nope")))
    with pytest.raises(error):
        _embedder(llm_server).embed(["a"])
    assert len(llm_server.requests) == 1


def test_a_timeout_is_transient_and_says_so(llm_server):
    llm_server.script("embed", Stall(5))
    with pytest.raises(TransientError, match=r"no answer within 0.3s"):
        _embedder(llm_server, embedding_timeout_s=0.3).embed(["a"])


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIEmbedder.from_settings(Settings(openai_api_key=None, gemini_api_key=None))
