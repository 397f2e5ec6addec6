"""``auto`` downgrades to ``json_object`` only when the server says it does not take
``json_schema`` at all; a schema the server finds invalid is our bug and surfaces as a
permanent error with the server's reason (design §11 "Providers"). Through the OpenAI adapter and its SDK
against the local server, which answers as each server's source does."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from pipeline.errors import PermanentError
from pipeline.llm.openai import OpenAILLM
from pipeline.llm.port import LLMRequest
from pipeline.prompts.facts import FactsAnswer
from schemas.settings import Settings
from testkit.llm_server import Answer, LLMServer

GOOD = '{"facts": [{"text": "The user lives in Berlin.", "scope": "user"}]}'


class Tagged(BaseModel):
    """An answer model whose schema strict mode refuses: a free-form object
    (``additionalProperties`` is a schema, not false)."""

    tags: dict[str, str]


def _llm(server: LLMServer, mode: str = "auto") -> OpenAILLM:
    return OpenAILLM.from_settings(Settings(openai_api_key=server.openai_key, gemini_api_key=None,
                                            openai_base_url=server.openai_base_url, openai_structured_output=mode))


def _request(response_model=FactsAnswer) -> LLMRequest:
    return LLMRequest(operation="extract_facts", model="gpt-6-luna", system="Extract facts.",
                      prompt="user: I live in Berlin.", response_model=response_model)


@pytest.mark.parametrize("server_kind", ["llama.cpp", "llama.cpp-500", "vllm", "openai-model"])
def test_auto_uses_json_object_after_a_server_says_it_has_no_json_schema(server_kind):
    with LLMServer(json_schema=server_kind) as server:
        server.script("chat", Answer(GOOD), Answer(GOOD))
        llm = _llm(server)
        first, second = llm.complete(_request()), llm.complete(_request())
        kinds = [(body.get("response_format") or {}).get("type") for body in server.bodies("/chat/completions")]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert first.structured_output == second.structured_output == "json_object"
    assert first.parsed.facts[0].text == "The user lives in Berlin."


def test_an_invalid_schema_in_auto_mode_is_a_permanent_error_with_the_servers_reason_and_no_downgrade():
    with LLMServer() as server:
        server.script("chat", Answer(GOOD))
        llm = _llm(server)
        with pytest.raises(PermanentError) as caught:
            llm.complete(_request(Tagged))
        # the mode was not given up: the next call still asks for json_schema, and is answered
        answer = llm.complete(_request())
        kinds = [body["response_format"]["type"] for body in server.bodies("/chat/completions")]
    message = str(caught.value)
    assert "HTTP 400" in message and "Invalid schema for response_format 'Tagged'" in message
    assert "'additionalProperties' is required to be supplied and to be false" in message
    assert "set MEMORY_OPENAI_STRUCTURED_OUTPUT" not in message   # the schema is at fault, not the mode
    assert kinds == ["json_schema", "json_schema"] and answer.structured_output == "json_schema"


@pytest.mark.parametrize("server_kind", ["llama.cpp-500", "vllm", "openai-model"])
def test_without_auto_a_server_without_json_schema_is_permanent_and_names_the_setting(server_kind):
    with LLMServer(json_schema=server_kind) as server:
        with pytest.raises(PermanentError, match="set MEMORY_OPENAI_STRUCTURED_OUTPUT to auto or json_object"):
            _llm(server, mode="json_schema").complete(_request())
        assert len(server.requests) == 1
