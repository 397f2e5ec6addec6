"""``bench.search_precision``: both question sets are asked under the previous and the shipped
fused cut, every demo question's label still names stored facts, and the shipped cut returns
no more than the previous one."""

from __future__ import annotations

import json

from testkit.benches import run_bench
from tests.ops.test_locomo_formation import SAMPLE


def test_the_bench_reports_both_sets_side_by_side_with_the_load(tmp_path):
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    out = run_bench("search_precision", "--data", str(data), "--json").figures
    assert len(out["setup"]["load_average"]) == 3
    previous, shipped = out["setup"]["thresholds"]["previous"], out["setup"]["thresholds"]["shipped"]
    assert (previous["rrf"], previous["rrf_rank"]) == (0.015, None)
    assert (shipped["rrf"], shipped["rrf_rank"]) == (None, 6)
    for part in (out["small_store"]["previous"]["all"], out["small_store"]["shipped"]["all"],
                 out["demo"]["previous"], out["demo"]["shipped"]):
        assert part["questions"] > 0 and 0 <= part["evidence_share"] <= 1
    # every answerable demo question has its facts in the formed store (the bench refuses otherwise)
    rows = out["demo"]["questions"]
    labelled = len(rows) - out["demo"]["shipped"]["unanswerable"]["questions"]
    assert sum(row["evidence"] >= 1 for row in rows) == labelled >= 10
    # the cut acts now: never more hits than before, fewer somewhere
    assert all(row["shipped"]["hits"] <= row["previous"]["hits"] for row in rows)
    assert out["demo"]["shipped"]["hits_per_query"] < out["demo"]["previous"]["hits_per_query"]
