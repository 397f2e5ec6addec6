"""Usage is priced under the model asked for, whatever snapshot the provider says answered
(design §11 "Observability and cost"): OpenAI names a dated snapshot of the requested
model, Gemini a ``modelVersion``, and neither is a key of the price table."""

from __future__ import annotations

import json

import pytest

from ops import cli
from ops.commands import cost as cost_command
from ops.commands import runs as runs_command
from pipeline.llm.gemini import GeminiLLM
from pipeline.llm.openai import OpenAILLM
from testkit.formation import ALICE_CHAT, make_env
from testkit.llm_server import Answer, LLMServer

FACTS = '{"facts": [{"text": "Alice\'s email is alice@example.com.", "scope": "user"}]}'
REFLECTIONS = '{"agent": [], "user": [], "session": []}'


def _formed_through(provider: str, tmp_path, monkeypatch, server: LLMServer, snapshot: str, **prices):
    env = make_env(tmp_path)
    route = "chat" if provider == "openai" else "generate"
    server.script(route, Answer(FACTS, usage=(1_000_000, 100_000), model=snapshot),
                  Answer(REFLECTIONS, usage=(2_000_000, 200_000), model=snapshot))
    settings = env.settings.model_copy(update={
        "llm_provider": provider, "openai_api_key": server.openai_key, "openai_base_url": server.openai_base_url,
        "gemini_api_key": server.gemini_key, "gemini_base_url": server.url, **prices})
    env.settings = settings
    env.llm = (OpenAILLM if provider == "openai" else GeminiLLM).from_settings(settings)
    run_id = env.new_run(ALICE_CHAT)
    env.through_reflections(run_id)
    for module in (runs_command, cost_command):
        monkeypatch.setattr(module, "get_settings", lambda: settings)
    return env, run_id


@pytest.mark.parametrize("provider, model, snapshot, prices, usd", [
    # gpt-6-luna is in the shipped table: $0.10 in, $0.50 out per million tokens
    ("openai", "gpt-6-luna", "gpt-6-luna-2026-09-22", {}, 3 * 0.10 + 0.3 * 0.50),
    # a Gemini model priced through MEMORY_PRICES
    ("gemini", "gemini-3.8-flash", "gemini-3.8-flash-001",
     {"prices": {"gemini-3.8-flash": {"input": 0.75, "output": 3.0}}}, 3 * 0.75 + 0.3 * 3.0),
])
def test_cost_prices_the_requested_model_when_the_provider_answers_with_a_dated_snapshot(
        provider, model, snapshot, prices, usd, tmp_path, monkeypatch, capsys):
    with LLMServer() as server:
        env, run_id = _formed_through(provider, tmp_path, monkeypatch, server, snapshot, **prices)
    usage = env.store.runs.get_run(run_id).stages["extract_facts"].usage.by_model
    assert list(usage) == [model]
    assert usage[model]["snapshots"] == [snapshot] and usage[model]["price"] == "priced"

    assert cli.main(["cost", "--agent", "agent-1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["unpriced"] == []
    assert report["total"]["usd"] == pytest.approx(usd)
    assert report["total"]["by_model"][model]["snapshots"] == [snapshot]

    assert cli.main(["cost", "--agent", "agent-1"]) == 0
    text = capsys.readouterr().out
    assert f"agent agent-1: ${usd:.6f}" in text and f"answered by {model} as {snapshot}" in text
    assert "unpriced" not in text

    assert cli.main(["runs"]) == 0
    assert f"answered by: {model} as {snapshot}" in capsys.readouterr().out
    env.store.close()
