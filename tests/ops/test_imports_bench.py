"""``bench.imports`` imports the same number of CRM lines batched and one at a time and prints
both rates with the load average: every line is stored each way, and the same file imported
again changes nothing."""

from __future__ import annotations

import json

from testkit.benches import run_bench


def test_the_import_bench_stores_every_line_both_ways_and_prints_the_load(tmp_path):
    run = run_bench("imports", "--lines", "30", "--json", env={"MEMORY_EMBEDDING_PROVIDER": "hashing",
                                                              "MEMORY_STORE_URL": ""})
    assert run.code == 0, run.err
    figures = json.loads(run.out.strip().splitlines()[-1])
    assert figures["batched"] == figures["one_at_a_time"] == {"added": 30, "rejected": 0}
    assert figures["again"] == {"added": 0, "rejected": 0, "unchanged": 30}   # a file imported twice: no change
    assert figures["batched_lines_per_s"] > 0 and len(figures["load_average_after"]) == 3
