"""The OpenAI adapter with the real ``openai`` client over a mock HTTP transport."""

import sys

import httpx
import pytest

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PermanentError, RateLimited, TransientError
from pipeline.llm.openai import OpenAILLM
from pipeline.llm.port import LLMRequest
from pipeline.prompts.facts import FactsAnswer
from schemas.settings import Settings

SETTINGS = Settings(openai_api_key="sk-test", gemini_api_key=None, openai_base_url="https://llm.example/v1")


def _completion(content, *, finish_reason="stop", refusal=None, usage=(120, 30)):
    return httpx.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-5-mini-2025",
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    })


def _error(status, message, headers=None):
    return httpx.Response(status, headers=headers or {}, json={"error": {"message": message, "type": "x", "code": None}})


def _request(timeout_s=12.0):
    return LLMRequest(operation="extract_facts", model="gpt-5-mini", system="Extract facts.",
                      prompt="user: I live in Berlin.", response_model=FactsAnswer, timeout_s=timeout_s)


def _llm(recorder):
    return OpenAILLM.from_settings(SETTINGS, http_client=recorder.client())


GOOD = '{"facts": [{"text": "The user lives in Berlin.", "scope": "user"}]}'


def test_the_request_carries_model_messages_and_the_strict_answer_schema(recorder):
    _llm(recorder.reply(_completion(GOOD))).complete(_request())
    sent = recorder.requests[0]
    assert str(sent.url) == "https://llm.example/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = recorder.body
    assert body["model"] == "gpt-5-mini"
    assert body["messages"] == [{"role": "system", "content": "Extract facts."},
                                {"role": "user", "content": "user: I live in Berlin."}]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "FactsAnswer"
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["facts"] and schema["additionalProperties"] is False
    assert schema["$defs"]["ExtractedFact"]["properties"]["scope"]["enum"] == ["user", "agent"]


def test_each_call_has_its_own_timeout(recorder):
    _llm(recorder.reply(_completion(GOOD))).complete(_request(timeout_s=7.5))
    assert recorder.requests[0].extensions["timeout"]["read"] == 7.5


def test_a_recorded_answer_is_parsed_with_its_token_usage(recorder):
    response = _llm(recorder.reply(_completion(GOOD))).complete(_request())
    assert response.parsed.facts[0].text == "The user lives in Berlin."
    assert (response.provider, response.input_tokens, response.output_tokens) == ("openai", 120, 30)
    assert response.model == "gpt-5-mini-2025" and response.raw == GOOD


@pytest.mark.parametrize(
    ("status", "reason"),
    [(401, "authentication"), (403, "permission"), (400, "bad request"), (404, "not found")],
)
def test_auth_and_bad_requests_are_permanent_with_a_clear_reason(recorder, status, reason):
    with pytest.raises(PermanentError, match=reason) as caught:
        _llm(recorder.reply(_error(status, "Incorrect API key provided"))).complete(_request())
    assert "Incorrect API key provided" in str(caught.value)
    assert not isinstance(caught.value, TransientError)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5), ({}, None)],
)
def test_a_429_is_rate_limited_with_its_retry_after(recorder, headers, seconds):
    with pytest.raises(RateLimited) as caught:
        _llm(recorder.reply(_error(429, "Rate limit reached", headers))).complete(_request())
    assert caught.value.retry_after == seconds


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_transient_and_the_sdk_does_not_retry_them_itself(recorder, status):
    with pytest.raises(TransientError) as caught:
        _llm(recorder.reply(_error(status, "overloaded"))).complete(_request())
    assert not isinstance(caught.value, (RateLimited, InvalidLLMAnswer))
    assert len(recorder.requests) == 1


def test_a_timeout_is_transient(recorder):
    with pytest.raises(TransientError, match="timed out"):
        _llm(recorder.reply(httpx.ReadTimeout("slow"))).complete(_request())


def test_a_lost_connection_is_transient(recorder):
    with pytest.raises(TransientError, match="connection"):
        _llm(recorder.reply(httpx.ConnectError("refused"))).complete(_request())


@pytest.mark.parametrize(
    "content",
    ['{"facts": [ not json', '{"facts": [{"text": "x", "scope": "session"}]}', '{"items": []}', ""],
    ids=["invalid-json", "bad-enum", "wrong-shape", "empty"],
)
def test_an_answer_that_does_not_validate_is_an_invalid_answer(recorder, content):
    with pytest.raises(InvalidLLMAnswer):
        _llm(recorder.reply(_completion(content))).complete(_request())


def test_a_refusal_is_an_invalid_answer(recorder):
    with pytest.raises(InvalidLLMAnswer, match="refused"):
        _llm(recorder.reply(_completion(None, refusal="I can't help with that."))).complete(_request())


def test_an_answer_cut_off_at_the_token_limit_is_an_invalid_answer(recorder):
    with pytest.raises(InvalidLLMAnswer, match="cut off"):
        _llm(recorder.reply(_completion('{"facts": [', finish_reason="length"))).complete(_request())


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAILLM.from_settings(Settings(openai_api_key=None, gemini_api_key=None))


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigurationError, match=r"memory-pipeline\[openai\]"):
        OpenAILLM.from_settings(SETTINGS)
