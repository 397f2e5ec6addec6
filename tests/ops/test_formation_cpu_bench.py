"""``bench.formation_cpu``: the bench's formations finish in one process, and each stage
reads and parses its run once (the erasure checks read the status alone)."""

from __future__ import annotations

from bench import formation_cpu
from pipeline.store.sqlite import db as sqlite_db
from pipeline.store.sqlite import SQLiteStore


def test_each_stage_parses_its_run_once_and_the_counting_is_undone(capsys):
    write, parse = sqlite_db.Database.write, SQLiteStore._run
    out = formation_cpu.main(["--formations", "20", "--warmup", "1"])
    # extract_facts, embed_facts, decide_facts, extract_reflections, consolidate, one scope, finish
    assert out["run_document_parses_per_formation"] == 7
    assert out["formations"] == 20 and out["cpu_ms_per_formation_min"] > 0
    assert len(out["load_average"]) == 3
    assert capsys.readouterr().out.strip().endswith("}")
    assert (sqlite_db.Database.write, SQLiteStore._run) == (write, parse)
