"""The Gemini adapter, with the real ``google-genai`` client, against a local server that speaks
the generateContent wire format and refuses what the API refuses."""

import sys

import pytest

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PermanentError, RateLimited, TransientError
from pipeline.llm.gemini import GeminiLLM, answer_schema
from pipeline.llm.port import LLMRequest
from pipeline.prompts.dedup import DecisionsAnswer
from pipeline.prompts.facts import EXPIRY_PATTERN, MAX_FILED, FactsAnswer, FiledFactsAnswer
from schemas.settings import Settings
from testkit import llm_wire
from testkit.llm_server import Answer, Error, LLMServer, Stall

GOOD = '{"decisions": [{"new": 0, "action": "UPDATE", "existing": 2, "text": "Alice lives in Munich."}]}'
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def _settings(server, **kw):
    return Settings(**{"gemini_api_key": server.gemini_key, "gemini_base_url": server.url, "openai_api_key": None, **kw})


def _llm(server, **kw):
    return GeminiLLM.from_settings(_settings(server, **kw))


def _request(timeout_s=None, model="gemini-3.8-flash"):
    return LLMRequest(operation="decide_facts", model=model, system="Decide.",
                      prompt="new 0: Alice lives in Munich.", response_model=DecisionsAnswer, timeout_s=timeout_s)


def test_the_request_carries_model_system_instruction_and_the_json_schema(llm_server):
    llm_server.script("generate", Answer(GOOD))
    _llm(llm_server).complete(_request())
    sent = llm_server.requests[0]
    assert sent.path.endswith("/models/gemini-3.8-flash:generateContent")
    assert sent.headers["x-goog-api-key"] == "g-test"
    body = sent.body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "new 0: Alice lives in Munich."}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "Decide."}]
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == answer_schema(DecisionsAnswer)
    decision = config["responseJsonSchema"]["$defs"]["FactDecision"]
    assert decision["additionalProperties"] is False
    assert decision["properties"]["action"]["enum"] == ["ADD", "UPDATE", "DELETE", "NONE"]


def test_the_facts_schema_carries_the_optional_deadline(llm_server):
    llm_server.script("generate", Answer('{"facts": [{"text": "The caterer needs the count by March 10.", '
                                         '"scope": "agent", "expires_at": "2026-03-10"}]}'))
    request = LLMRequest(operation="extract_facts", model="gemini-3.8-flash", system="Extract.",
                         prompt="user: the caterer needs the count by March 10.", response_model=FactsAnswer)
    response = _llm(llm_server).complete(request)
    fact = llm_server.requests[0].body["generationConfig"]["responseJsonSchema"]["$defs"]["ExtractedFact"]
    # the shape a constrained decoder must write: a date, or a date-time with its offset
    assert fact["properties"]["expires_at"]["anyOf"] == [{"type": "string", "pattern": EXPIRY_PATTERN},
                                                         {"type": "null"}]
    assert "expires_at" not in fact.get("required", []) and "default" not in fact["properties"]["expires_at"]
    assert response.parsed.facts[0].expires_at == "2026-03-10"


def test_the_answer_schema_drops_defaults_but_keeps_every_field():
    schema = answer_schema(DecisionsAnswer)
    fields = schema["$defs"]["FactDecision"]["properties"]
    assert set(fields) == {"new", "action", "existing", "text"}
    assert all("default" not in field for field in fields.values())


@pytest.mark.parametrize(("mode", "mime"), [("json_object", "application/json"), ("prompt", None)])
def test_the_json_object_and_prompt_modes_put_the_schema_in_the_system_instruction(llm_server, mode, mime):
    llm_server.script("generate", Answer(GOOD))
    response = _llm(llm_server, gemini_structured_output=mode).complete(_request())
    config = llm_server.requests[0].body.get("generationConfig", {})
    assert config.get("responseMimeType") == mime and "responseJsonSchema" not in config
    assert '"FactDecision"' in llm_server.requests[0].body["systemInstruction"]["parts"][0]["text"]
    assert response.structured_output == mode


@pytest.mark.parametrize(
    "text", ["```json\n" + GOOD + "\n```", "Sure:\n" + GOOD, "<think>hmm</think>" + GOOD],
    ids=["fenced", "prose", "think"],
)
def test_a_wrapped_answer_is_parsed_locally(llm_server, text):
    llm_server.script("generate", Answer(text))
    assert _llm(llm_server).complete(_request()).parsed.decisions[0].existing == 2


def test_the_call_timeout_is_the_tier_of_its_model(llm_server):
    llm_server.script("generate", Stall(5))
    llm = _llm(llm_server, llm_timeout_fast_s=0.3, llm_timeout_free_s=0.3, llm_timeout_premium_s=45)
    assert llm.timeout_for(_request(model="gemini-3.1-pro-preview")) == 45
    with pytest.raises(TransientError, match=r"no answer within 0.3s: request timed out") as caught:
        llm.complete(_request())
    assert "HTTP" not in str(caught.value)


def test_a_recorded_answer_is_parsed_with_its_token_usage_thinking_included_and_mode(llm_server):
    llm_server.script("generate", Answer(GOOD, usage=(200, 40), thoughts=15))
    response = _llm(llm_server).complete(_request())
    assert response.parsed.decisions[0].existing == 2
    assert (response.provider, response.input_tokens, response.output_tokens) == ("gemini", 200, 55)
    assert response.model == "gemini-3.8-flash" and response.structured_output == "json_schema"


def test_a_key_that_is_not_valid_is_an_auth_error_not_a_bad_request(llm_server):
    with pytest.raises(PermanentError, match=r"authentication failed: the API key is not valid \(API_KEY_INVALID\)"):
        _llm(llm_server, gemini_api_key="AIza-wrong").complete(_request())


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [(400, "INVALID_ARGUMENT", "bad request"), (403, "PERMISSION_DENIED", "permission"),
     (404, "NOT_FOUND", "not found")],
)
def test_other_refusals_are_permanent_with_a_clear_reason(llm_server, code, status, reason):
    llm_server.script("generate", Error.of(llm_wire.gemini_error(code, status, "models/x is not found.")))
    with pytest.raises(PermanentError, match=reason) as caught:
        _llm(llm_server).complete(_request())
    assert "models/x is not found." in str(caught.value)


def test_a_429_is_rate_limited_with_the_retry_after_header(llm_server):
    llm_server.script("generate", Error.of(llm_wire.gemini_error(429, "RESOURCE_EXHAUSTED", "quota"), {"retry-after": "11"}))
    with pytest.raises(RateLimited) as caught:
        _llm(llm_server).complete(_request())
    assert caught.value.retry_after == 11.0


def test_a_429_without_the_header_takes_the_retry_delay_from_the_error_body(llm_server):
    details = [{"@type": RETRY_INFO, "retryDelay": "37s"}]
    llm_server.script("generate", Error.of(llm_wire.gemini_error(429, "RESOURCE_EXHAUSTED", "quota", details)))
    with pytest.raises(RateLimited) as caught:
        _llm(llm_server).complete(_request())
    assert caught.value.retry_after == 37.0


@pytest.mark.parametrize(("code", "status"), [(500, "INTERNAL"), (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED")])
def test_server_errors_are_transient_and_the_sdk_does_not_retry_them_itself(llm_server, code, status):
    llm_server.script("generate", Error.of(llm_wire.gemini_error(code, status, "overloaded")))
    with pytest.raises(TransientError) as caught:
        _llm(llm_server).complete(_request())
    assert not isinstance(caught.value, (RateLimited, InvalidLLMAnswer))
    assert len(llm_server.requests) == 1


def test_a_refused_connection_says_so_and_is_transient():
    with LLMServer() as server:
        settings = _settings(server)
    with pytest.raises(TransientError, match=r"connection failed \(ConnectError") as caught:
        GeminiLLM.from_settings(settings).complete(_request())
    assert "HTTP" not in str(caught.value)


@pytest.mark.parametrize(
    "text",
    ['{"decisions": [ not json', '{"decisions": [{"new": 0, "action": "MERGE"}]}', '{"facts": []}', ""],
    ids=["invalid-json", "bad-enum", "wrong-shape", "empty"],
)
def test_an_answer_that_does_not_validate_is_an_invalid_answer(llm_server, text):
    llm_server.script("generate", Answer(text))
    with pytest.raises(InvalidLLMAnswer):
        _llm(llm_server).complete(_request())


def test_an_answer_cut_off_at_the_token_limit_is_an_invalid_answer(llm_server):
    llm_server.script("generate", Answer(GOOD, truncated=True))
    with pytest.raises(InvalidLLMAnswer, match="cut off"):
        _llm(llm_server).complete(_request())


def test_the_server_refuses_what_the_api_refuses():
    assert llm_wire.check_generate({"contents": []})[0] == 400
    both = {"contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseSchema": {}, "responseJsonSchema": {}}}
    assert llm_wire.check_generate(both)[0] == 400
    schema_as_text = {"contents": [{"role": "user", "parts": [{"text": "x"}]}],
                      "generationConfig": {"responseJsonSchema": {"type": "object"}}}
    assert "application/json" in llm_wire.check_generate(schema_as_text)[1]["error"]["message"]


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="GEMINI_API_KEY"):
        GeminiLLM.from_settings(Settings(gemini_api_key=None, openai_api_key=None))


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch, llm_server):
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(ConfigurationError, match=r"memory-pipeline\[gemini\]"):
        GeminiLLM.from_settings(_settings(llm_server))


def test_auto_falls_back_to_json_object_when_the_schema_field_is_refused(llm_server):
    # what the API (or a gateway on an older API version) answers for a field it does not know
    unknown = llm_wire.gemini_error(400, "INVALID_ARGUMENT", 'Invalid JSON payload received. Unknown name '
                                    '"responseJsonSchema" at \'generation_config\': Cannot find field.')
    llm_server.script("generate", Error.of(unknown), Answer(GOOD), Answer(GOOD))
    llm = _llm(llm_server, gemini_structured_output="auto")
    first, second = llm.complete(_request()), llm.complete(_request())
    configs = [body["generationConfig"] for body in llm_server.bodies(":generateContent")]
    assert "responseJsonSchema" in configs[0]
    assert configs[1:] == [{"responseMimeType": "application/json"}] * 2
    assert (first.structured_output, second.structured_output) == ("json_object", "json_object")


def test_the_filed_facts_schema_is_one_gemini_takes(llm_server):
    llm_server.script("generate", Answer('{"facts": [{"text": "The venue budget is $9,000.", "scope": "agent", '
                                         '"expires_at": null, "categories": ["finance"]}]}'))
    request = LLMRequest(operation="extract_facts", model="gemini-3.8-flash", system="Extract.",
                         prompt="user: the venue budget is $9,000.", response_model=FiledFactsAnswer)
    response = _llm(llm_server).complete(request)
    fact = llm_server.requests[0].body["generationConfig"]["responseJsonSchema"]["$defs"]["FiledFact"]
    assert fact["properties"]["categories"]["maxItems"] == MAX_FILED
    assert response.parsed.facts[0].categories == ["finance"]
