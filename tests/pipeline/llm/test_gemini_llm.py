"""The Gemini adapter with the real ``google-genai`` client over a mock HTTP transport."""

import sys

import httpx
import pytest

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PermanentError, RateLimited, TransientError
from pipeline.llm.gemini import GeminiLLM, answer_schema
from pipeline.llm.port import LLMRequest
from pipeline.prompts.dedup import DecisionsAnswer
from schemas.settings import Settings

SETTINGS = Settings(gemini_api_key="g-test", openai_api_key=None)
GOOD = '{"decisions": [{"new": 0, "action": "UPDATE", "existing": 2, "text": "Alice lives in Munich."}]}'


def _answer(text, *, finish_reason="STOP", usage=(200, 40, 15)):
    return httpx.Response(200, json={
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish_reason}],
        "usageMetadata": {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
                          "thoughtsTokenCount": usage[2], "totalTokenCount": sum(usage)},
        "modelVersion": "gemini-3-flash-preview-001",
    })


def _error(code, status, message, headers=None, details=None):
    error = {"code": code, "status": status, "message": message}
    if details:
        error["details"] = details
    return httpx.Response(code, headers=headers or {}, json={"error": error})


def _request(timeout_s=9.0):
    return LLMRequest(operation="decide_facts", model="gemini-3-flash-preview", system="Decide.",
                      prompt="new 0: Alice lives in Munich.", response_model=DecisionsAnswer, timeout_s=timeout_s)


def _llm(recorder):
    return GeminiLLM.from_settings(SETTINGS, http_client=recorder.client())


def test_the_request_carries_model_system_instruction_and_the_json_schema(recorder):
    _llm(recorder.reply(_answer(GOOD))).complete(_request())
    sent = recorder.requests[0]
    assert sent.url.path.endswith("/models/gemini-3-flash-preview:generateContent")
    assert sent.headers["x-goog-api-key"] == "g-test"
    body = recorder.body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "new 0: Alice lives in Munich."}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "Decide."}]
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == answer_schema(DecisionsAnswer)
    decision = config["responseJsonSchema"]["$defs"]["FactDecision"]
    assert decision["additionalProperties"] is False
    assert decision["properties"]["action"]["enum"] == ["ADD", "UPDATE", "DELETE", "NONE"]


def test_the_answer_schema_drops_defaults_but_keeps_every_field():
    schema = answer_schema(DecisionsAnswer)
    fields = schema["$defs"]["FactDecision"]["properties"]
    assert set(fields) == {"new", "action", "existing", "text"}
    assert all("default" not in field for field in fields.values())


def test_each_call_has_its_own_timeout(recorder):
    _llm(recorder.reply(_answer(GOOD))).complete(_request(timeout_s=4.0))
    assert recorder.requests[0].extensions["timeout"]["read"] == 4.0


def test_a_recorded_answer_is_parsed_with_its_token_usage(recorder):
    response = _llm(recorder.reply(_answer(GOOD))).complete(_request())
    assert response.parsed.decisions[0].existing == 2
    assert (response.provider, response.input_tokens, response.output_tokens) == ("gemini", 200, 55)
    assert response.model == "gemini-3-flash-preview-001"


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [(400, "INVALID_ARGUMENT", "bad request"), (401, "UNAUTHENTICATED", "authentication"),
     (403, "PERMISSION_DENIED", "permission"), (404, "NOT_FOUND", "not found")],
)
def test_auth_and_bad_requests_are_permanent_with_a_clear_reason(recorder, code, status, reason):
    with pytest.raises(PermanentError, match=reason) as caught:
        _llm(recorder.reply(_error(code, status, "API key not valid."))).complete(_request())
    assert "API key not valid." in str(caught.value)


def test_a_429_is_rate_limited_with_the_retry_after_header(recorder):
    with pytest.raises(RateLimited) as caught:
        _llm(recorder.reply(_error(429, "RESOURCE_EXHAUSTED", "quota", {"retry-after": "11"}))).complete(_request())
    assert caught.value.retry_after == 11.0


def test_a_429_without_the_header_takes_the_retry_delay_from_the_error_body(recorder):
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]
    with pytest.raises(RateLimited) as caught:
        _llm(recorder.reply(_error(429, "RESOURCE_EXHAUSTED", "quota", details=details))).complete(_request())
    assert caught.value.retry_after == 37.0


@pytest.mark.parametrize(("code", "status"), [(500, "INTERNAL"), (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED")])
def test_server_errors_are_transient_and_the_sdk_does_not_retry_them_itself(recorder, code, status):
    with pytest.raises(TransientError) as caught:
        _llm(recorder.reply(_error(code, status, "overloaded"))).complete(_request())
    assert not isinstance(caught.value, (RateLimited, InvalidLLMAnswer))
    assert len(recorder.requests) == 1


def test_a_timeout_is_transient(recorder):
    with pytest.raises(TransientError, match="timed out"):
        _llm(recorder.reply(httpx.ReadTimeout("slow"))).complete(_request())


def test_a_lost_connection_is_transient(recorder):
    with pytest.raises(TransientError, match="connection"):
        _llm(recorder.reply(httpx.ConnectError("refused"))).complete(_request())


@pytest.mark.parametrize(
    "text",
    ['{"decisions": [ not json', '{"decisions": [{"new": 0, "action": "MERGE"}]}', '{"facts": []}', ""],
    ids=["invalid-json", "bad-enum", "wrong-shape", "empty"],
)
def test_an_answer_that_does_not_validate_is_an_invalid_answer(recorder, text):
    with pytest.raises(InvalidLLMAnswer):
        _llm(recorder.reply(_answer(text))).complete(_request())


@pytest.mark.parametrize(("finish", "reason"), [("MAX_TOKENS", "cut off"), ("SAFETY", "safety")])
def test_an_answer_cut_off_or_withheld_is_an_invalid_answer(recorder, finish, reason):
    with pytest.raises(InvalidLLMAnswer, match=reason):
        _llm(recorder.reply(_answer('{"decisions": [', finish_reason=finish))).complete(_request())


def test_a_blocked_prompt_with_no_candidates_is_an_invalid_answer(recorder):
    blocked = httpx.Response(200, json={"promptFeedback": {"blockReason": "SAFETY"}})
    with pytest.raises(InvalidLLMAnswer, match="blocked"):
        _llm(recorder.reply(blocked)).complete(_request())


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY"):
        GeminiLLM.from_settings(Settings(gemini_api_key=None, openai_api_key=None))


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(ConfigurationError, match=r"memory-pipeline\[gemini\]"):
        GeminiLLM.from_settings(SETTINGS)
