"""Every provider call has a hard wall-clock bound (design §11 "Providers", bounded work): a server that
trickles its answer, a byte at a time, never trips httpx's read timeout, so the adapters bound
the whole call themselves. Through the adapters' real SDKs against the local server."""

from __future__ import annotations

import time

import pytest

from pipeline.embeddings.openai import OpenAIEmbedder
from pipeline.errors import TransientError
from pipeline.llm.deadline import DeadlineExceeded
from pipeline.llm.gemini import GeminiLLM
from pipeline.llm.openai import OpenAILLM
from pipeline.llm.port import LLMRequest
from pipeline.prompts.facts import FactsAnswer
from schemas.settings import Settings
from testkit.llm_server import Answer, LLMServer, Trickle

GOOD = '{"facts": [{"text": "The user lives in Berlin.", "scope": "user"}]}'
TIMEOUT_S = 0.5


def _request() -> LLMRequest:
    return LLMRequest(operation="extract_facts", model="gpt-6-luna", system="Extract facts.",
                      prompt="user: I live in Berlin.", response_model=FactsAnswer, timeout_s=TIMEOUT_S)


def _settings(server: LLMServer) -> Settings:
    return Settings(_env_file=None, openai_api_key=server.openai_key, openai_base_url=server.openai_base_url,
                    gemini_api_key=server.gemini_key, gemini_base_url=server.url, embedding_timeout_s=TIMEOUT_S)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_a_trickled_answer_is_abandoned_at_the_calls_bound_while_the_server_still_sends(provider):
    with LLMServer() as server:
        # ten times the timeout, every read answered within a fraction of it
        server.script("chat" if provider == "openai" else "generate", Trickle(Answer(GOOD), seconds=10 * TIMEOUT_S))
        llm = (OpenAILLM if provider == "openai" else GeminiLLM).from_settings(_settings(server))
        with pytest.raises(DeadlineExceeded, match=r"no whole answer within 0.5s") as caught:
            llm.complete(_request())
        unfinished, sent_whole = server.trickles()
    assert isinstance(caught.value, TransientError)     # retried like any timeout
    # the caller did not wait for the answer: the server had not sent its last byte (it is still
    # sending, or has already found the connection closed: which, depends on the machine's load)
    assert (unfinished, sent_whole) == (1, 0)


def test_a_trickled_embedding_answer_is_abandoned_too():
    with LLMServer() as server:
        server.script("embed", Trickle(Answer(""), seconds=10 * TIMEOUT_S))
        embedder = OpenAIEmbedder.from_settings(_settings(server))
        with pytest.raises(DeadlineExceeded, match="openai embeddings"):
            embedder.embed(["Alice lives in Berlin."])
        assert server.trickles() == (1, 0)   # not sent whole: the caller did not wait for it


def test_an_answer_within_the_bound_is_returned_as_usual():
    with LLMServer() as server:
        server.script("chat", Trickle(Answer(GOOD), seconds=TIMEOUT_S / 5))
        answer = OpenAILLM.from_settings(_settings(server)).complete(_request())
    assert answer.parsed.facts[0].text == "The user lives in Berlin."


@pytest.mark.parametrize("lease", ["claim_lease_s", "consolidation_lease_s"])
def test_a_lease_shorter_than_one_provider_call_is_refused_at_load_naming_the_settings(lease):
    with pytest.raises(ValueError) as caught:
        Settings(_env_file=None, llm_provider="openai", openai_api_key="sk-x", llm_slot_wait_s=60,
                 llm_timeout_premium_s=180, task_soft_time_limit_s=100, task_time_limit_s=150, **{lease: 200})
    message = str(caught.value)
    assert f"MEMORY_{lease.upper()} (200s) must be above the longest provider call (241s" in message
    assert "MEMORY_LLM_SLOT_WAIT_S" in message and "MEMORY_LLM_TIMEOUT_FAST_S/_FREE_S/_PREMIUM_S" in message
    # the offline rules call no server: no provider call to outlive
    Settings(_env_file=None, llm_provider="offline", embedding_provider="hashing", task_soft_time_limit_s=100,
             task_time_limit_s=150, **{lease: 200})


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_an_abandoned_call_stops_reading_and_hangs_up_at_its_bound(provider):
    with LLMServer() as server:
        server.script("chat" if provider == "openai" else "generate", Trickle(Answer(GOOD), seconds=20 * TIMEOUT_S))
        llm = (OpenAILLM if provider == "openai" else GeminiLLM).from_settings(_settings(server))
        with pytest.raises(DeadlineExceeded):
            llm.complete(_request())
        # the helper thread's next chunk is past the deadline: it hangs up, and the server's next
        # byte finds the connection closed, long before the trickle would have ended
        waited = 0.0
        while server.in_flight and waited < 5 * TIMEOUT_S:
            time.sleep(0.05)
            waited += 0.05
        assert server.in_flight == 0
