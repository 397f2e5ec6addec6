"""``python -m bench.ann``: the ANN comparison bench runs end to end at a small size, and
says how to get usearch (which the project does not depend on) when it is missing."""

import importlib.util

import pytest

from testkit.benches import run_bench


def test_missing_usearch_exits_2_with_the_install_line(tmp_path):
    # a ``usearch`` ahead of any installed one that fails to import, as a missing one does
    (tmp_path / "usearch.py").write_text('raise ImportError("No module named \'usearch\'")\n')
    done = run_bench("ann", "--facts", "200", "--queries", "2", "--json", path=(tmp_path,))
    assert done.code == 2
    assert "pip install usearch" in done.err


def test_small_run_prints_both_sides_and_the_load_average():
    if importlib.util.find_spec("usearch") is None:
        pytest.skip("usearch is not installed")
    # in its own process: once usearch is loaded, simsimd's int8 distances fail or crash in
    # that process, and the rest of the suite searches with simsimd
    result = run_bench("ann", "--facts", "600", "--queries", "8", "--expansion-search", "64", "--json").figures
    shipped, hnsw = result["int8_scan_rescore"], result["usearch_hnsw"]
    assert shipped["recall_at_10"] >= 0.99 and shipped["recall_at_1"] == 1.0
    assert set(hnsw["by_expansion_search"]["64"]) == {"query_ms", "recall_at_10", "recall_at_1"}
    assert len(result["load_average"]) == 3


def test_too_few_facts_is_refused():
    done = run_bench("ann", "--facts", "10")
    assert done.code == 2
    assert "--facts must be >= 100" in done.err
