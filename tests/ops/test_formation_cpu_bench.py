"""``bench.formation_cpu``: the bench's formations finish in one process, and each stage
reads and parses its run once (the erasure checks read the status alone)."""

from __future__ import annotations

from testkit.benches import run_bench


def test_each_stage_parses_its_run_once():
    out = run_bench("formation_cpu", "--formations", "20", "--warmup", "1").figures
    # extract_facts, embed_facts, decide_facts, extract_reflections, consolidate, one scope, finish
    assert out["run_document_parses_per_formation"] == 7
    assert out["formations"] == 20 and out["cpu_ms_per_formation_min"] > 0
    assert len(out["load_average"]) == 3
