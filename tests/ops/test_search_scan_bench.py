"""``bench.search_scan``: every scan thread count and concurrency is measured, the split scan
finds the same top 10 as one thread, and the load average is printed."""

from __future__ import annotations

import pytest

from testkit.benches import run_bench


def test_each_setting_is_reported_with_the_same_top_ten_and_the_load():
    out = run_bench("search_scan", "--facts", "5000", "--queries", "12", "--threads", "1,2",
                    "--concurrency", "1,3", "--json").figures
    for threads in ("threads=1", "threads=2"):
        for concurrency in ("concurrency=1", "concurrency=3"):
            row = out[threads][concurrency]
            assert row["same_top10"] == 1.0 and 0 < row["p50_ms"] <= row["p95_ms"] and row["queries_per_s"] > 0
    assert len(out["setup"]["load_average"]) == 3 and out["setup"]["facts"] == 5000


@pytest.mark.parametrize(("argv", "said"), [
    (["--facts", "100"], "--facts must be at least 4096"),
    (["--threads", "0"], "expected integers of 1 or more"),
    (["--concurrency", "1,x"], "expected integers separated by commas"),
])
def test_bad_options_are_refused_with_the_reason(argv, said):
    done = run_bench("search_scan", *argv)
    assert done.code == 2 and said in done.err and "Traceback" not in done.err
