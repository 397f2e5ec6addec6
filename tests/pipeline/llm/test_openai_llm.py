"""The OpenAI adapter, with the real ``openai`` client, against a local server that speaks the
Chat Completions wire format and refuses what the API refuses."""

import sys

import pytest

from pipeline.errors import ConfigurationError, InvalidLLMAnswer, PermanentError, RateLimited, TransientError
from pipeline.llm.openai import OpenAILLM
from pipeline.llm.port import LLMRequest
from pipeline.prompts.dedup import DecisionsAnswer
from pipeline.prompts.facts import CATEGORY_PATTERN, EXPIRY_PATTERN, MAX_FILED, FactsAnswer, FiledFactsAnswer
from schemas.settings import Settings
from testkit import llm_wire
from testkit.llm_server import INSUFFICIENT_QUOTA, Answer, Error, LLMServer, Stall, rate_limited

GOOD = '{"facts": [{"text": "The user lives in Berlin.", "scope": "user"}]}'


def _settings(server, **kw):
    base = dict(openai_api_key=server.openai_key, gemini_api_key=None, openai_base_url=server.openai_base_url)
    return Settings(**{**base, **kw})


def _llm(server, **kw):
    return OpenAILLM.from_settings(_settings(server, **kw))


def _request(timeout_s=None, model="gpt-6-luna", response_model=FactsAnswer):
    return LLMRequest(operation="extract_facts", model=model, system="Extract facts.",
                      prompt="user: I live in Berlin.", response_model=response_model, timeout_s=timeout_s)


def test_the_request_carries_model_messages_and_the_strict_answer_schema(llm_server):
    llm_server.script("chat", Answer(GOOD))
    _llm(llm_server).complete(_request())
    sent = llm_server.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == "Bearer sk-test"
    body = sent.body
    assert body["model"] == "gpt-6-luna"
    assert body["messages"] == [{"role": "system", "content": "Extract facts."},
                                {"role": "user", "content": "user: I live in Berlin."}]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "FactsAnswer"
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["facts"] and schema["additionalProperties"] is False
    assert schema["$defs"]["ExtractedFact"]["properties"]["scope"]["enum"] == ["user", "agent"]


def test_optional_fields_are_required_in_the_strict_schema_the_server_accepts(llm_server):
    # strict mode refuses an object that does not list every property in `required`
    llm_server.script("chat", Answer('{"decisions": [{"new": 0, "action": "ADD", "existing": null, "text": null}]}'))
    response = _llm(llm_server).complete(_request(response_model=DecisionsAnswer))
    decision = llm_server.requests[0].body["response_format"]["json_schema"]["schema"]["$defs"]["FactDecision"]
    assert decision["required"] == ["new", "action", "existing", "text"]
    assert response.parsed.decisions[0].action == "ADD"


def test_the_facts_schema_asks_for_a_deadline_as_a_required_nullable_string(llm_server):
    llm_server.script("chat", Answer('{"facts": [{"text": "The caterer needs the count by March 10.", '
                                     '"scope": "agent", "expires_at": "2026-03-10"}, '
                                     '{"text": "The venue is in Tucson.", "scope": "agent", "expires_at": null}]}'))
    response = _llm(llm_server).complete(_request())
    fact = llm_server.requests[0].body["response_format"]["json_schema"]["schema"]["$defs"]["ExtractedFact"]
    assert fact["required"] == ["text", "scope", "expires_at"]
    # the shape a constrained decoder must write: a date, or a date-time with its offset
    assert fact["properties"]["expires_at"]["anyOf"] == [{"type": "string", "pattern": EXPIRY_PATTERN},
                                                         {"type": "null"}]
    assert [f.expires_at for f in response.parsed.facts] == ["2026-03-10", None]


@pytest.mark.parametrize(
    "text",
    ["```json\n" + GOOD + "\n```", "Here are the facts:\n" + GOOD + "\nLet me know if you need more.",
     "<think>The user said Berlin, so {maybe} a fact.</think>\n" + GOOD,
     "<think>long reasoning</think>\n```json\n" + GOOD + "\n```"],
    ids=["fenced", "prose-around", "think-block", "think-then-fence"],
)
def test_an_answer_wrapped_in_a_fence_prose_or_think_block_is_parsed_locally(llm_server, text):
    llm_server.script("chat", Answer(text))
    response = _llm(llm_server).complete(_request())
    assert response.parsed.facts[0].text == "The user lives in Berlin." and response.raw == text


def test_the_call_timeout_is_the_tier_of_its_model(llm_server):
    llm_server.script("chat", Stall(5))
    llm = _llm(llm_server, llm_timeout_fast_s=0.3, llm_timeout_free_s=0.3, llm_timeout_premium_s=30)
    assert llm.timeout_for(_request(model="gpt-6.1-sol")) == 30
    with pytest.raises(TransientError, match=r"no answer within 0.3s: request timed out") as caught:
        llm.complete(_request(model="gpt-6-luna"))
    assert "HTTP" not in str(caught.value)


def test_a_recorded_answer_carries_its_token_usage_and_its_mode(llm_server):
    llm_server.script("chat", Answer(GOOD, usage=(120, 30)))
    response = _llm(llm_server).complete(_request())
    assert (response.provider, response.input_tokens, response.output_tokens) == ("openai", 120, 30)
    assert response.model == "gpt-6-luna" and response.structured_output == "json_schema"


def test_a_server_that_reports_no_usage_gets_an_estimate_not_zero(llm_server):
    llm_server.script("chat", Answer(GOOD, usage=None))
    response = _llm(llm_server).complete(_request())
    assert response.input_tokens > 0 and response.output_tokens > 0


def test_auto_falls_back_to_json_object_when_the_server_refuses_json_schema_and_remembers_it():
    with LLMServer(openai_key=None, json_schema=False) as server:  # llama.cpp without schema support
        server.script("chat", Answer("```json\n" + GOOD + "\n```"), Answer(GOOD))
        llm = _llm(server, openai_api_key=None, openai_structured_output="auto")
        first = llm.complete(_request())
        second = llm.complete(_request())
        formats = [body.get("response_format") for body in server.bodies("/chat/completions")]
    assert formats[0]["type"] == "json_schema" and formats[1:] == [{"type": "json_object"}] * 2
    assert (first.structured_output, second.structured_output) == ("json_object", "json_object")
    system = server.bodies("/chat/completions")[1]["messages"][0]["content"]
    assert system.startswith("Extract facts.") and '"facts"' in system and "JSON Schema" in system
    assert first.parsed.facts[0].scope == "user"


def test_without_auto_a_refused_json_schema_is_a_permanent_bad_request():
    with LLMServer(json_schema=False) as server:
        with pytest.raises(PermanentError, match='response_format type must be one of "text" or "json_object"') as caught:
            _llm(server, openai_structured_output="json_schema").complete(_request())
        assert "set MEMORY_OPENAI_STRUCTURED_OUTPUT to auto or json_object" in str(caught.value)
        assert len(server.requests) == 1


@pytest.mark.parametrize("mode", ["json_object", "prompt"])
def test_the_json_object_and_prompt_modes_put_the_schema_in_the_system_prompt(llm_server, mode):
    llm_server.script("chat", Answer(GOOD))
    response = _llm(llm_server, openai_structured_output=mode).complete(_request())
    body = llm_server.requests[0].body
    assert body.get("response_format") == ({"type": "json_object"} if mode == "json_object" else None)
    assert '"ExtractedFact"' in body["messages"][0]["content"]
    assert response.structured_output == mode


@pytest.mark.parametrize(
    ("error", "reason"),
    [(Error.of(llm_wire.openai_error(401, "Incorrect API key provided", code="invalid_api_key")), "authentication"),
     (Error.of(llm_wire.openai_error(403, "Project does not have access")), "permission"),
     (Error.of(llm_wire.openai_error(404, "The model does not exist", code="model_not_found")), "not found")],
)
def test_auth_and_bad_requests_are_permanent_with_a_clear_reason(llm_server, error, reason):
    llm_server.script("chat", error)
    with pytest.raises(PermanentError, match=reason) as caught:
        _llm(llm_server).complete(_request())
    assert error.body["error"]["message"] in str(caught.value)


def test_a_wrong_key_is_refused_by_the_server_as_an_auth_error(llm_server):
    with pytest.raises(PermanentError, match="authentication failed"):
        _llm(llm_server, openai_api_key="sk-wrong").complete(_request())


def test_an_exhausted_quota_is_billing_and_permanent_not_a_rate_limit(llm_server):
    llm_server.script("chat", INSUFFICIENT_QUOTA)
    with pytest.raises(PermanentError, match="billing: the account has no quota left") as caught:
        _llm(llm_server).complete(_request())
    assert not isinstance(caught.value, TransientError)


@pytest.mark.parametrize(("retry_after", "seconds"), [("7", 7.0), (None, None)])
def test_a_429_is_rate_limited_with_its_retry_after(llm_server, retry_after, seconds):
    llm_server.script("chat", rate_limited(retry_after))
    with pytest.raises(RateLimited) as caught:
        _llm(llm_server).complete(_request())
    assert caught.value.retry_after == seconds


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_transient_and_the_sdk_does_not_retry_them_itself(llm_server, status):
    llm_server.script("chat", Error.of(llm_wire.openai_error(status, "overloaded", type_="server_error")))
    with pytest.raises(TransientError) as caught:
        _llm(llm_server).complete(_request())
    assert not isinstance(caught.value, (RateLimited, InvalidLLMAnswer))
    assert len(llm_server.requests) == 1


def test_a_refused_connection_says_so_and_is_transient():
    with LLMServer() as server:
        settings = _settings(server)
    with pytest.raises(TransientError, match=r"connection failed \(ConnectError") as caught:
        OpenAILLM.from_settings(settings).complete(_request())
    assert "HTTP" not in str(caught.value)


@pytest.mark.parametrize(
    "text",
    ['{"facts": [ not json', '{"facts": [{"text": "x", "scope": "session"}]}', '{"items": []}', "",
     "I could not find any facts."],
    ids=["invalid-json", "bad-enum", "wrong-shape", "empty", "prose-only"],
)
def test_an_answer_that_does_not_validate_is_an_invalid_answer(llm_server, text):
    llm_server.script("chat", Answer(text))
    with pytest.raises(InvalidLLMAnswer):
        _llm(llm_server).complete(_request())


def test_an_answer_cut_off_at_the_token_limit_is_an_invalid_answer(llm_server):
    llm_server.script("chat", Answer(GOOD, truncated=True))
    with pytest.raises(InvalidLLMAnswer, match="cut off"):
        _llm(llm_server).complete(_request())


def test_the_server_refuses_what_the_api_refuses():
    # the emulation is strict: a schema without a name or a request without a model is a 400
    with LLMServer() as server:
        refusal = llm_wire.check_chat({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                       "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})
        assert refusal[0] == 400 and "json_schema.name" in refusal[1]["error"]["message"]
        assert llm_wire.check_chat({"messages": [{"role": "user", "content": "x"}]})[0] == 400
        assert llm_wire.check_chat({"model": "m", "messages": [{"role": "robot", "content": "x"}]})[0] == 400
        json_object = {"model": "m", "messages": [{"role": "user", "content": "x"}],
                       "response_format": {"type": "json_object"}}
        assert "must contain the word 'json'" in llm_wire.check_chat(json_object)[1]["error"]["message"]
        loose = {"type": "object", "properties": {"a": {"type": "string"}}}
        assert "additionalProperties" in llm_wire.strict_schema_problem(loose, ())
        # and over HTTP, with OpenAI's error body
        import httpx

        answer = httpx.post(f"{server.openai_base_url}/chat/completions", headers={"authorization": "Bearer sk-test"},
                            json={"messages": [{"role": "user", "content": "x"}]})
        assert answer.status_code == 400
        assert answer.json()["error"] == {"message": "you must provide a model parameter",
                                          "type": "invalid_request_error", "param": None, "code": None}
        assert server.unscripted == 0


def test_a_missing_key_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAILLM.from_settings(Settings(openai_api_key=None, gemini_api_key=None))


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch, llm_server):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigurationError, match=r"memory-pipeline\[openai\]"):
        OpenAILLM.from_settings(_settings(llm_server))


@pytest.mark.parametrize("name", ["facts.FactsAnswer", "dedup.DecisionsAnswer", "reflections.ReflectionsAnswer",
                                  "consolidation.ConsolidationAnswer"])
def test_the_strict_schema_is_the_one_the_sdk_itself_would_send(name):
    # chat.completions.parse sent the SDK's strict form; create() must send the same schema
    import importlib

    from pipeline.llm.structured import strict_schema

    sdk = pytest.importorskip("openai.lib._pydantic")
    module, _, cls = name.partition(".")
    model = getattr(importlib.import_module(f"pipeline.prompts.{module}"), cls)
    assert strict_schema(model) == sdk.to_strict_json_schema(model)
    assert llm_wire.strict_schema_problem(strict_schema(model), ()) is None


def test_the_filed_facts_schema_passes_strict_mode_and_a_name_outside_the_list_reaches_the_filter(llm_server):
    # strict mode: `categories` required like every property, its bounds in keywords it supports
    llm_server.script("chat", Answer('{"facts": [{"text": "The venue budget is $9,000.", "scope": "agent", '
                                     '"expires_at": null, "categories": ["finance", "Astrology"]}]}'))
    response = _llm(llm_server).complete(_request(response_model=FiledFactsAnswer))
    schema = llm_server.requests[0].body["response_format"]["json_schema"]["schema"]
    fact = schema["$defs"]["FiledFact"]
    assert fact["required"] == ["text", "scope", "expires_at", "categories"]
    assert fact["properties"]["categories"]["items"] == {"type": "string", "pattern": CATEGORY_PATTERN}
    assert fact["properties"]["categories"]["maxItems"] == MAX_FILED
    # the answer is not held to the list here: ``filter_facts`` drops the unknown name alone
    assert response.parsed.facts[0].categories == ["finance", "Astrology"]
