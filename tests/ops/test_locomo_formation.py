"""``bench.locomo_formation`` on a tiny LoCoMo-shaped file: the real chain forms it and
both providers are measured and labelled."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from testkit.procs import REPO_ROOT

SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I moved to Lisbon last month, I love the light there."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Wow, Lisbon! How is the new flat?"},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "Small but sunny. Oh and I adopted a dog called Pepper."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "I started a pottery class at the Riverside Studio on Tuesdays."},
            {"speaker": "Caroline", "dia_id": "D2:2", "text": "That sounds lovely, send me a picture of your first bowl!"},
        ],
    },
    "observation": {
        "session_1_observation": {
            "Caroline": [["Caroline moved to Lisbon in April 2023.", "D1:1"],
                         ["Caroline adopted a dog named Pepper.", "D1:3"]],
            "Melanie": [],
        },
        "session_2_observation": {
            "Melanie": [["Melanie takes a pottery class at the Riverside Studio on Tuesdays.", "D2:1"]],
        },
    },
    "qa": [
        {"question": "Where did Caroline move to?", "answer": "Lisbon", "evidence": ["D1:1"], "category": 4},
        {"question": "What is the name of Caroline's dog?", "answer": "Pepper", "evidence": ["D1:3"], "category": 4},
        {"question": "Where does Melanie take a pottery class?", "answer": "Riverside Studio", "evidence": ["D2:1"], "category": 4},
        {"question": "What did Caroline do?", "answer": "moved", "category": 5},
    ],
}


def _run(tmp_path, *args: str) -> dict:
    """The bench on ``SAMPLE``, as a user runs it; its JSON line."""
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "bench.locomo_formation", "--data", str(data), "--json", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_both_providers_form_through_the_chain_and_are_measured(tmp_path):
    out = _run(tmp_path)
    replay, rules = out["observation_replay"], out["offline_rules"]
    assert "not a product provider" in replay["provider"] and rules["provider"] == "offline rules provider"
    for r in (replay, rules):
        assert r["questions"] == 3  # the question without evidence is not asked
        assert r["chain"]["messages"] == 5 and r["chain"]["formations"] >= 2
        assert r["chain"]["formations_not_done"] == 0 and r["chain"]["sessions_late"] == []
        assert r["chain"]["llm_calls_per_formation"] > 0 and r["chain"]["tokens_per_formation"] > 0
    # the replayed facts are found, and mapped back to their turns by provenance
    assert replay["chain"]["facts"] == 3
    assert replay["recall@10"] == 1.0 and replay["recall@5"] == 1.0
    # two speakers make a group chat: the rules form no user fact ("I moved to Lisbon")
    assert rules["recall@10"] == 0.0
    assert out["setup"]["conversations"] == 1 and len(out["setup"]["load_average"]) == 3
    assert out["setup"]["chats"] == "group"


def test_one_to_one_chats_let_the_rules_form_each_speakers_own_facts(tmp_path):
    out = _run(tmp_path, "--provider", "offline_rules", "--one-to-one")
    rules = out["offline_rules"]
    assert out["setup"]["chats"] == "one-to-one" and "observation_replay" not in out
    # each speaker's chat holds every turn: the other speaker's as the agent's
    assert rules["chain"]["messages"] == 10 and rules["chain"]["formations_not_done"] == 0
    # each question is asked in the chat of the speaker it names, where "I adopted a dog called
    # Pepper" and Melanie's "I started a pottery class" are user facts; "I moved to Lisbon last
    # month, I love the light there" carries a preference, which the rules leave to reflections
    assert rules["questions"] == 3 and rules["recall@10"] == 0.6667


def test_a_missing_data_file_is_a_clear_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.locomo_formation", "--data", str(tmp_path / "nope.json")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and "no such file" in result.stderr
