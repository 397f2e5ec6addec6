"""``python -m bench.ann``: the ANN comparison bench runs end to end at a small size, and
says how to get usearch (which the project does not depend on) when it is missing."""

import importlib.util
import json
import subprocess
import sys

import pytest

from bench import ann


def test_missing_usearch_exits_2_with_the_install_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "usearch", None)  # makes ``import usearch`` raise ImportError
    assert ann.main(["--facts", "200", "--queries", "2", "--json"]) == 2
    assert "pip install usearch" in capsys.readouterr().err


def test_small_run_prints_both_sides_and_the_load_average():
    if importlib.util.find_spec("usearch") is None:
        pytest.skip("usearch is not installed")
    # in its own process: once usearch is loaded, simsimd's int8 distances fail or crash in
    # that process, and the rest of the suite searches with simsimd
    done = subprocess.run([sys.executable, "-m", "bench.ann", "--facts", "600", "--queries", "8",
                           "--expansion-search", "64", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    shipped, hnsw = result["int8_scan_rescore"], result["usearch_hnsw"]
    assert shipped["recall_at_10"] >= 0.99 and shipped["recall_at_1"] == 1.0
    assert set(hnsw["by_expansion_search"]["64"]) == {"query_ms", "recall_at_10", "recall_at_1"}
    assert len(result["load_average"]) == 3


def test_too_few_facts_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        ann.main(["--facts", "10"])
    assert exit_.value.code == 2
    assert "--facts must be >= 100" in capsys.readouterr().err
