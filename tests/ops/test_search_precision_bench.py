"""``bench.search_precision``: both question sets are asked under the previous and the shipped
fused cut, every demo question's label still names stored facts, and the shipped cut returns
no more than the previous one."""

from __future__ import annotations

import json

from bench import search_precision
from tests.ops.test_locomo_formation import SAMPLE


def test_the_bench_reports_both_sets_side_by_side_with_the_load(tmp_path, capsys):
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    assert search_precision.main(["--data", str(data), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(out["setup"]["load_average"]) == 3
    previous, shipped = out["setup"]["thresholds"]["previous"], out["setup"]["thresholds"]["shipped"]
    assert (previous["rrf"], previous["rrf_rank"]) == (0.015, None)
    assert (shipped["rrf"], shipped["rrf_rank"]) == (None, 6)
    for part in (out["small_store"]["previous"]["all"], out["small_store"]["shipped"]["all"],
                 out["demo"]["previous"], out["demo"]["shipped"]):
        assert part["questions"] > 0 and 0 <= part["evidence_share"] <= 1
    # every answerable demo question has its facts in the formed store (the bench refuses otherwise)
    rows = out["demo"]["questions"]
    assert len(rows) == len(search_precision.DEMO_QUESTIONS)
    labelled = [q for q in search_precision.DEMO_QUESTIONS if q.answer]
    assert all(row["evidence"] >= 1 for row, q in zip(rows, search_precision.DEMO_QUESTIONS) if q.answer)
    assert len(labelled) >= 10
    # the cut acts now: never more hits than before, fewer somewhere
    assert all(row["shipped"]["hits"] <= row["previous"]["hits"] for row in rows)
    assert out["demo"]["shipped"]["hits_per_query"] < out["demo"]["previous"]["hits_per_query"]
