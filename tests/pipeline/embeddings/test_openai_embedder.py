"""The OpenAI embedder with the real ``openai`` client over a mock HTTP transport."""

import json

import httpx
import numpy as np
import pytest

from pipeline.embeddings.openai import OpenAIEmbedder
from pipeline.errors import ConfigurationError, PermanentError, RateLimited, TransientError
from schemas.settings import Settings

SETTINGS = Settings(openai_api_key="sk-test", gemini_api_key=None)


class _Server:
    def __init__(self, *responses):
        self.responses = list(responses)
        self.requests = []

    def __call__(self, request):
        self.requests.append(request)
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        return response(json.loads(request.content)) if callable(response) else response


def _vectors(body):
    # answers in reverse order, as the API is free to; the adapter must restore it
    rows = [{"object": "embedding", "index": i, "embedding": [float(i + 1)] + [0.0] * 1535}
            for i in range(len(body["input"]))]
    return httpx.Response(200, json={"object": "list", "model": body["model"], "data": rows[::-1],
                                     "usage": {"prompt_tokens": 17, "total_tokens": 17}})


def _embedder(server):
    return OpenAIEmbedder.from_settings(SETTINGS, http_client=httpx.Client(transport=httpx.MockTransport(server)))


def test_one_batched_request_carries_the_model_and_every_text():
    server = _Server(_vectors)
    result = _embedder(server).embed(["Alice lives in Berlin.", "", "Bob is a nurse."])
    assert len(server.requests) == 1
    body = json.loads(server.requests[0].content)
    assert body["model"] == "text-embedding-3-small" and body["encoding_format"] == "float"
    assert body["input"] == ["Alice lives in Berlin.", " ", "Bob is a nurse."]
    assert (result.model, result.dim, result.input_tokens) == ("text-embedding-3-small", 1536, 17)


def test_vectors_come_back_in_input_order_and_unit_length():
    vectors = np.array(_embedder(_Server(_vectors)).embed(["a", "b", "c"]).vectors)
    assert vectors.shape == (3, 1536)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors[:, 0], 1.0)   # each row was scaled from its own first component


def test_an_empty_batch_makes_no_call():
    server = _Server()
    assert _embedder(server).embed([]).vectors == [] and server.requests == []


def test_a_429_is_rate_limited_with_its_retry_after():
    server = _Server(httpx.Response(429, headers={"retry-after": "4"}, json={"error": {"message": "slow down"}}))
    with pytest.raises(RateLimited) as caught:
        _embedder(server).embed(["a"])
    assert caught.value.retry_after == 4.0


@pytest.mark.parametrize(("status", "error"), [(500, TransientError), (401, PermanentError), (400, PermanentError)])
def test_http_errors_map_onto_the_error_tree(status, error):
    server = _Server(httpx.Response(status, json={"error": {"message": "nope"}}))
    with pytest.raises(error):
        _embedder(server).embed(["a"])
    assert len(server.requests) == 1


def test_a_timeout_is_transient():
    with pytest.raises(TransientError, match="timed out"):
        _embedder(_Server(httpx.ReadTimeout("slow"))).embed(["a"])


def test_a_response_of_the_wrong_shape_is_transient():
    short = httpx.Response(200, json={"object": "list", "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1},
                                      "data": [{"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}]})
    with pytest.raises(TransientError, match="dimensions"):
        _embedder(_Server(short)).embed(["a"])


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIEmbedder.from_settings(Settings(openai_api_key=None, gemini_api_key=None))
