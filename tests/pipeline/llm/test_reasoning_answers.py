"""Reasoning before the answer never becomes the answer (design §11 "Providers"): text up to the last
closing reasoning tag is dropped, paired or not, and of the JSON left the last object that
validates against the stage's answer model is taken. Every case goes through the OpenAI
adapter and its real SDK against the local Chat Completions server."""

from __future__ import annotations

import pytest

from pipeline.errors import InvalidLLMAnswer
from pipeline.formation import stages
from pipeline.llm.openai import OpenAILLM
from pipeline.llm.port import LLMRequest
from pipeline.prompts.facts import FactsAnswer
from schemas.settings import Settings
from testkit.formation import ALICE_CHAT, make_env
from testkit.llm_server import Answer, LLMServer

BERLIN = '{"facts": [{"text": "The user lives in Berlin.", "scope": "user"}]}'
DRAFT = '{"facts": []}'


def _complete(server: LLMServer, text: str) -> FactsAnswer:
    server.script("chat", Answer(text))
    llm = OpenAILLM.from_settings(Settings(openai_api_key=server.openai_key, gemini_api_key=None,
                                           openai_base_url=server.openai_base_url))
    return llm.complete(LLMRequest(operation="extract_facts", model="gpt-6-luna", system="Extract facts.",
                                   prompt="user: I live in Berlin.", response_model=FactsAnswer)).parsed


@pytest.mark.parametrize("text", [
    # the opening tag was in the chat template: only the closing one reaches the client
    f"Okay, the user says Berlin. A first draft: {DRAFT} but that misses it.</think>\n\n{BERLIN}",
    f"<think>draft {DRAFT}</think>{BERLIN}",
    f"<thinking>\n{DRAFT}\n</thinking>\n```json\n{BERLIN}\n```",
    f"weighing it {DRAFT}</reasoning>Here is the answer: {BERLIN}",
    # two closing tags: the answer follows the last one
    f"<think>{DRAFT}</think>still thinking {DRAFT}</think >{BERLIN}",
    # after the reasoning, the last object that validates wins over an earlier one ...
    f"</think>{DRAFT} On second thought: {BERLIN}",
    # ... and over a later object outside the schema
    f"</think>{BERLIN}\nNotes: {{\"confidence\": 0.9}}",
])
def test_the_answer_after_the_reasoning_is_the_one_taken(llm_server, text):
    answer = _complete(llm_server, text)
    assert [fact.text for fact in answer.facts] == ["The user lives in Berlin."]


@pytest.mark.parametrize("text, says", [
    # the only valid object sits inside the reasoning: it is never the answer
    (f"The answer is {BERLIN}.</think>Sorry, I cannot tell.", "answered outside the FactsAnswer schema"),
    # a reasoning block that never closed: the answer was cut off while thinking
    (f"<think>Berlin, so {BERLIN}", "gave only reasoning, no answer"),
    (f"{BERLIN}</think>   ", "gave only reasoning, no answer"),
])
def test_json_inside_the_reasoning_is_an_invalid_answer_not_an_answer(llm_server, text, says):
    with pytest.raises(InvalidLLMAnswer, match=says):
        _complete(llm_server, text)


def test_facts_after_an_unpaired_closing_tag_are_stored_by_the_formation_stage(tmp_path):
    env = make_env(tmp_path)
    fact = '{"facts": [{"text": "Alice\'s email is alice@example.com.", "scope": "user"}]}'
    with LLMServer() as server:
        server.script("chat", Answer(f'Okay… {DRAFT} …</think>\n\n{fact}'))
        env.settings = env.settings.model_copy(update={
            "llm_provider": "openai", "openai_api_key": server.openai_key, "openai_base_url": server.openai_base_url})
        env.llm = OpenAILLM.from_settings(env.settings)
        run_id = env.new_run(ALICE_CHAT)
        result = stages.extract_facts(run_id, env)
    assert [f["text"] for f in result.output["facts"]] == ["Alice's email is alice@example.com."]
    env.store.close()
