"""The structured-output mode each call used is recorded on the run, beside its tokens."""

from pipeline.formation import stages
from pipeline.llm.openai import OpenAILLM
from schemas.settings import Settings
from testkit.formation import ALICE_CHAT, make_env
from testkit.llm_server import Answer, LLMServer

FACTS = '{"facts": [{"text": "Alice\'s email is alice@example.com.", "scope": "user"}]}'


def test_a_fallback_to_json_object_is_recorded_on_the_stage_with_its_tokens(tmp_path):
    env = make_env(tmp_path)
    with LLMServer(openai_key=None, json_schema=False) as server:   # a server without json_schema
        server.script("chat", Answer("<think>an email</think>```json\n" + FACTS + "\n```", usage=(300, 40)))
        env.llm = OpenAILLM.from_settings(Settings(openai_api_key=None, gemini_api_key=None,
                                                   openai_base_url=server.openai_base_url))
        run_id = env.new_run(ALICE_CHAT)
        stages.extract_facts(run_id, env)
    usage = env.store.runs.get_run(run_id).stages["extract_facts"].usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 300, 40)
    assert usage.structured_output == {"json_object": 1}
    env.store.close()
