"""An answer the model gave but that cannot be used is asked again
``MEMORY_LLM_INVALID_ANSWER_RETRIES`` times, not ``MEMORY_TASK_MAX_RETRIES`` times like a
timeout, and the run is then recorded as failed with the reason. The stage task runs through
Celery's own retry (eager apply reruns it at once) and the OpenAI adapter against the local
Chat Completions server."""

from __future__ import annotations

import pytest

from pipeline.llm.openai import OpenAILLM
from testkit.formation import ALICE_CHAT, make_env
from testkit.llm_server import Answer, LLMServer
from workers import deps as worker_deps
from workers import formation as worker_formation

FACTS = '{"facts": [{"text": "Alice\'s email is alice@example.com.", "scope": "user"}]}'


@pytest.mark.parametrize("retries", [0, 2])
def test_a_length_stop_is_asked_again_as_often_as_the_setting_says_then_the_run_fails_with_why(
        tmp_path, sent, retries):
    env = make_env(tmp_path)
    with LLMServer() as server:
        server.script("chat", *[Answer(FACTS, truncated=True)] * 10)   # every answer cut at max tokens
        env.settings = env.settings.model_copy(update={
            "llm_provider": "openai", "openai_api_key": server.openai_key, "openai_base_url": server.openai_base_url,
            "llm_invalid_answer_retries": retries, "task_max_retries": 5})
        env.llm = OpenAILLM.from_settings(env.settings)
        worker_deps.set_deps(env)
        try:
            run_id = env.new_run(ALICE_CHAT)
            worker_formation.extract_facts.apply(kwargs={"run_id": run_id})
        finally:
            worker_deps.set_deps(None)
        calls = len(server.bodies("/chat/completions"))
    run = env.store.runs.get_run(run_id)
    assert calls == retries + 1
    assert run.status == "failed" and sent == []
    assert run.error.startswith(f"extract_facts: InvalidLLMAnswer after {retries} retries: ")
    assert "the answer was cut off at the output token limit" in run.error
    env.store.close()
