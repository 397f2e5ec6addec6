"""``memoryctl runs`` shows each run's cost; ``memoryctl cost`` sums an agent's (design §11)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from ops import cli
from ops.commands import cost as cost_command
from ops.commands import runs as runs_command
from pipeline.clock import FrozenClock
from pipeline.cost import price_models
from pipeline.store import open_store
from schemas.documents import LLMUsage, StageRecord, UsageRecord
from schemas.settings import Settings
from testkit.sessions import cold_run

PRICES = {"gpt-6-luna": {"input": 0.10, "output": 0.50}}


@pytest.fixture
def settings(tmp_path, monkeypatch) -> Settings:
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'memory.db'}", embedding_provider="hashing")
    for module in (runs_command, cost_command):
        monkeypatch.setattr(module, "get_settings", lambda: settings)
    return settings


@pytest.fixture
def store(settings):
    store = open_store(settings)
    store.create_indexes()
    yield store
    store.close()


def _calls(**models):
    """by_model rows priced with PRICES: model=(provider, calls, tokens in, tokens out)."""
    rows = {m.replace("_", "-"): {"kind": "embedding" if "embedding" in m else "llm", "provider": p, "calls": c,
                                  "input_tokens": i, "output_tokens": o}
            for m, (p, c, i, o) in models.items()}
    return price_models(rows, PRICES)


def _run_with(store, settings, clock, session_id, stage, by_model):
    run_id = cold_run(store, settings, clock, session_id)
    store.runs.start_stage(run_id, stage, clock.now())
    store.runs.complete_stage(run_id, stage, StageRecord(
        status="done", output={}, started_at=clock.now(), finished_at=clock.now(), duration_ms=10.0, attempts=1,
        usage=LLMUsage(calls=1, input_tokens=1000, output_tokens=200, by_model=by_model)))
    return run_id


def test_runs_shows_each_runs_cost_and_names_an_unpriced_model(store, settings, capsys):
    clock = FrozenClock()
    _run_with(store, settings, clock, "s1", "extract_facts",
              _calls(gpt_6_luna=("openai", 1, 1_000_000, 200_000), mystery_model=("openai", 1, 10, 10)))
    assert cli.main(["runs", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["cost"]["usd"] == pytest.approx(0.20) and row["cost"]["unpriced"] == ["mystery-model"]
    assert cli.main(["runs"]) == 0
    assert "cost $0.200000 + unpriced (mystery-model)" in capsys.readouterr().out


def test_cost_sums_runs_and_session_end_consolidations_by_model_stage_and_day(store, settings, capsys):
    clock = FrozenClock()
    _run_with(store, settings, clock, "s1", "extract_facts", _calls(gpt_6_luna=("openai", 1, 1_000_000, 0)))
    clock.advance(days=1)
    _run_with(store, settings, clock, "s2", "decide_facts",
              _calls(gpt_6_luna=("openai", 1, 0, 1_000_000), hashing_64=("hashing", 1, 50, 0)))
    store.stats.record_usage(UsageRecord(usage_id="u1", agent_id="a1", session_id="s2", stage="consolidate_session",
                                   at=clock.now(), by_model=_calls(gpt_6_luna=("openai", 1, 2_000_000, 0))))
    store.stats.record_usage(UsageRecord(usage_id="u2", agent_id="other", stage="consolidate_session",
                                   at=clock.now(), by_model=_calls(gpt_6_luna=("openai", 1, 9_000_000, 0))))

    assert cli.main(["cost", "--agent", "a1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"]["usd"] == pytest.approx(0.10 + 0.50 + 0.20) and report["total"]["unpriced"] == []
    assert report["groups"]["gpt-6-luna"]["by_model"]["gpt-6-luna"]["calls"] == 3
    assert report["groups"]["hashing-64"]["by_model"]["hashing-64"]["price"] == "offline"

    assert cli.main(["cost", "--agent", "a1", "--by", "stage", "--json"]) == 0
    by_stage = json.loads(capsys.readouterr().out)["groups"]
    assert sorted(by_stage) == ["consolidate_session", "decide_facts", "extract_facts"]
    assert by_stage["consolidate_session"]["usd"] == pytest.approx(0.20)

    assert cli.main(["cost", "--agent", "a1", "--by", "day", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["groups"]) == 2

    assert cli.main(["cost", "--agent", "a1"]) == 0
    text = capsys.readouterr().out
    assert "agent a1: $0.800000" in text and "hashing-64" in text and "offline ($0)" in text


def test_cost_since_leaves_out_older_calls(store, settings, capsys, monkeypatch):
    from pipeline import clock as clock_module

    clock = FrozenClock()
    _run_with(store, settings, clock, "s1", "extract_facts", _calls(gpt_6_luna=("openai", 1, 1_000_000, 0)))
    clock.advance(days=10)
    _run_with(store, settings, clock, "s2", "extract_facts", _calls(gpt_6_luna=("openai", 1, 3_000_000, 0)))
    monkeypatch.setattr(clock_module.Clock, "now", lambda self: clock.now() + timedelta(minutes=1))
    assert cli.main(["cost", "--agent", "a1", "--since", "7d", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["usd"] == pytest.approx(0.30)


def test_cost_refuses_a_since_it_cannot_read(store, settings, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["cost", "--agent", "a1", "--since", "a week"])
    assert exited.value.code == 2
    assert "expected a duration such as 7d, 12h or 30m, or an ISO date or time" in capsys.readouterr().err


@pytest.mark.parametrize("prices, says", [
    ('{"gpt-x": {"input": -1, "output": 2}}', "model 'gpt-x': give exactly \"input\" and \"output\""),
    ('{"gpt-x": {"input": 1}}', "model 'gpt-x': give exactly \"input\" and \"output\""),
    ("not json", "MEMORY_PRICES cannot be parsed"),
])
def test_a_price_table_it_cannot_use_is_one_clear_line(tmp_path, prices, says):
    import os
    import subprocess
    import sys

    from testkit.procs import REPO_ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update({"MEMORY_PRICES": prices, "MEMORY_STORE_URL": f"sqlite:///{tmp_path / 'm.db'}",
                "PYTHONPATH": str(REPO_ROOT)})
    result = subprocess.run([sys.executable, "-m", "ops.cli", "cost", "--agent", "a1"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and says in result.stderr and "Traceback" not in result.stderr
