"""The Gemini embedder, with the real ``google-genai`` client, against a local server that
speaks the batchEmbedContents wire format and refuses what the API refuses."""

import numpy as np
import pytest

from pipeline.embeddings.gemini import GeminiEmbedder
from pipeline.errors import ConfigurationError, PermanentError, RateLimited, TransientError
from schemas.settings import Settings
from testkit import llm_wire
from testkit.llm_server import Error, Stall


def _embedder(server, **kw):
    base = dict(gemini_api_key=server.gemini_key, gemini_base_url=server.url, openai_api_key=None)
    return GeminiEmbedder.from_settings(Settings(**{**base, **kw}))


def test_one_request_carries_the_model_and_every_text_and_learns_the_dimension(llm_server):
    result = _embedder(llm_server).embed(["Alice lives in Berlin.", ""])
    (sent,) = llm_server.requests
    assert sent.path.endswith("/models/gemini-embedding-001:batchEmbedContents")
    texts = [r["content"]["parts"][0]["text"] for r in sent.body["requests"]]
    assert texts == ["Alice lives in Berlin.", " "]
    assert {r["model"] for r in sent.body["requests"]} == {"models/gemini-embedding-001"}
    assert (result.model, result.dim) == ("gemini-embedding-001", 3072) and result.input_tokens > 0
    assert np.allclose(np.linalg.norm(np.array(result.vectors), axis=1), 1.0)


def test_the_dimension_setting_goes_out_as_output_dimensionality(llm_server):
    embedder = _embedder(llm_server, embedding_dimensions=768)
    assert embedder.dim == 768 and llm_server.requests == []
    assert embedder.embed(["x"]).dim == 768
    assert llm_server.requests[0].body["requests"][0]["outputDimensionality"] == 768


def test_batches_over_the_apis_100_are_sent_in_chunks_in_order(llm_server):
    texts = [f"fact {i}" for i in range(230)]
    vectors = np.array(_embedder(llm_server, embedding_dimensions=8).embed(texts).vectors)
    assert [len(b["requests"]) for b in llm_server.bodies("batchEmbedContents")] == [100, 100, 30]
    expected = np.array(llm_wire.vector("fact 229", 8))
    assert np.allclose(vectors[229], expected / np.linalg.norm(expected), atol=1e-5)


def test_an_empty_batch_makes_no_call(llm_server):
    result = _embedder(llm_server, embedding_dimensions=8).embed([])
    assert (result.vectors, result.dim) == ([], 8) and llm_server.requests == []


def test_a_key_that_is_not_valid_is_an_auth_error(llm_server):
    with pytest.raises(PermanentError, match="API key is not valid"):
        _embedder(llm_server, gemini_api_key="wrong").embed(["x"])


def test_a_429_is_rate_limited(llm_server):
    llm_server.script("embed", Error.of(llm_wire.gemini_error(429, "RESOURCE_EXHAUSTED", "quota"), {"retry-after": "3"}))
    with pytest.raises(RateLimited) as caught:
        _embedder(llm_server).embed(["x"])
    assert caught.value.retry_after == 3.0


def test_a_timeout_is_transient_and_says_so(llm_server):
    llm_server.script("embed", Stall(5))
    with pytest.raises(TransientError, match=r"no answer within 0.3s"):
        _embedder(llm_server, embedding_timeout_s=0.3).embed(["x"])


def test_the_server_refuses_a_request_whose_model_is_not_the_urls():
    refusal = llm_wire.check_batch_embed({"requests": [{"model": "models/other", "content": {"parts": [{"text": "x"}]}}]},
                                         "gemini-embedding-001")
    assert refusal[0] == 400 and "must match the model in the URL" in refusal[1]["error"]["message"]


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY"):
        GeminiEmbedder.from_settings(Settings(gemini_api_key=None, openai_api_key=None))
