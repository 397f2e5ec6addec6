"""The offline provider as a whole: labelled as offline, no network, valid answers, clear errors."""

from __future__ import annotations

import socket
from datetime import datetime, timedelta, timezone

import pytest

from pipeline.conversation import render_conversation
from pipeline.errors import PermanentError
from pipeline.llm import open_llm
from pipeline.llm.offline import MODEL, PROVIDER, OfflineLLM
from pipeline.llm.port import LLMRequest
from pipeline.prompts.consolidation import ConsolidationAnswer, build_consolidation_request
from pipeline.prompts.dedup import build_dedup_request
from pipeline.prompts.facts import FactsAnswer, build_facts_request
from pipeline.prompts.reflections import build_reflections_request
from schemas.documents import StoredMessage
from schemas.settings import Settings

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
LINES = [
    "Hi, I'm Alice. My email is alice@example.com.",
    "The Mars Festival budget is $50,000.",
    "I prefer short answers.",
    "Can you draft the sponsor letter?",
]
MESSAGES = [
    StoredMessage(agent_id="a1", session_id="s1", message_id=f"m{i}", event_id=f"e{i}", seq=i, role="user",
                  sender_id="u1", sender_name="Alice", content=text, created_at=T0 + timedelta(minutes=i),
                  ingested_at=T0, session_users=["u1"])
    for i, text in enumerate(LINES)
]
TEXT = render_conversation(MESSAGES)

REQUESTS = {
    "extract_facts": build_facts_request(TEXT, MESSAGES, user_scope=True, agent_scope=True, agent_name=None,
                                         user_names={}, model="gpt-5-mini"),
    "decide_facts": build_dedup_request(["Alice's email is alice@new.com"],
                                        {0: [(1, "Alice's email is alice@example.com")]}, model="gpt-5-mini"),
    "extract_reflections": build_reflections_request(MESSAGES, scopes=["agent", "user", "session"], blobs={},
                                                     unabsorbed={}, new_facts=[], model="gpt-5.1"),
    "consolidate": build_consolidation_request("user", "", ["Alice prefers short answers"], word_limit=300,
                                               model="gpt-5.1"),
}


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the offline provider opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize("operation", list(REQUESTS))
def test_every_answer_is_labelled_offline_validated_and_made_without_network(operation, no_network):
    request = REQUESTS[operation]
    response = OfflineLLM(Settings()).complete(request)
    assert (response.provider, response.model) == (PROVIDER, MODEL) == ("offline", "offline-rules-v1")
    assert isinstance(response.parsed, request.response_model)
    assert request.response_model.model_validate_json(response.raw) == response.parsed


@pytest.mark.parametrize("operation", list(REQUESTS))
def test_token_usage_is_estimated_from_characters(operation):
    request = REQUESTS[operation]
    response = OfflineLLM().complete(request)
    assert response.input_tokens == (len(request.system) + 3) // 4 + (len(request.prompt) + 3) // 4
    assert response.output_tokens == (len(response.raw) + 3) // 4 > 0


@pytest.mark.parametrize("operation", list(REQUESTS))
def test_the_same_request_always_gets_the_same_answer(operation):
    assert OfflineLLM().complete(REQUESTS[operation]).raw == OfflineLLM().complete(REQUESTS[operation]).raw


def test_the_planted_conversation_yields_its_facts():
    facts = OfflineLLM().complete(REQUESTS["extract_facts"]).parsed
    assert isinstance(facts, FactsAnswer)
    assert [(f.text, f.scope) for f in facts.facts] == [
        ("The user's name is Alice", "user"), ("Alice's email is alice@example.com", "user"),
        ("The Mars Festival budget is $50,000", "agent"),
    ]


def test_a_consolidated_blob_names_the_offline_provider():
    answer = OfflineLLM().complete(REQUESTS["consolidate"]).parsed
    assert isinstance(answer, ConsolidationAnswer)
    assert any("offline rules provider" in b for s in answer.sections for b in s.bullets)


def test_the_settings_word_limit_applies_when_the_inputs_carry_none():
    request = build_facts_request(TEXT, MESSAGES, user_scope=True, agent_scope=True, agent_name=None,
                                  user_names={}, model="m")
    bare = LLMRequest(operation=request.operation, model="m", system="", prompt="", response_model=FactsAnswer,
                      inputs={k: v for k, v in request.inputs.items() if k != "word_limit"})
    texts = [f.text for f in OfflineLLM(Settings(fact_word_limit=4)).complete(bare).parsed.facts]
    assert texts == ["Alice's email is alice@example.com"]   # 4 words; the 5- and 6-word facts are dropped


def test_an_unknown_operation_is_a_permanent_error_naming_the_known_ones():
    request = LLMRequest(operation="summarize", model="m", system="", prompt="", response_model=FactsAnswer)
    with pytest.raises(PermanentError, match="summarize.*consolidate, decide_facts"):
        OfflineLLM().complete(request)


def test_inputs_not_written_by_a_prompt_builder_are_a_clear_permanent_error():
    request = LLMRequest(operation="consolidate", model="m", system="", prompt="",
                         response_model=ConsolidationAnswer, inputs={"scope": "user"})
    with pytest.raises(PermanentError, match="inputs are not what its prompt builder writes"):
        OfflineLLM().complete(request)


def test_with_no_key_and_no_choice_the_factory_gives_the_offline_provider(monkeypatch):
    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MEMORY_LLM_PROVIDER"):
        monkeypatch.delenv(key, raising=False)
    assert isinstance(open_llm(Settings(_env_file=None)), OfflineLLM)
