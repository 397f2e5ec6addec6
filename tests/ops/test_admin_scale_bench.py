"""``bench.admin_scale``: every operation runs in its own process on a built store and the
report holds its time, peak RSS, the growth between sizes and the load average."""

from __future__ import annotations

from testkit.benches import run_bench

OPERATIONS = {"export", "stats", "cost", "context", "forget", "verify"}


def test_the_bench_times_every_operation_at_each_size():
    # two samples of each read show --repeat at work (the changes run once) with four fewer
    # processes to start than the default three
    out = run_bench("admin_scale", "--facts", "100", "--mongo", "--repeat", "2").figures
    row = out["sizes"]["100"]
    assert OPERATIONS <= set(row)
    assert all(row[op]["peak_rss_mb"] > 0 and row[op]["seconds"] >= 0 for op in OPERATIONS)
    assert row["export"]["detail"] > 0 and row["forget"]["detail"] == 10 and row["verify"]["detail"] is True
    assert row["cost"]["detail"] == 200  # the window holds the two probed runs (a call of 100 input tokens each)
    assert len(row["export"]["samples_s"]) == 2 and len(row["forget"]["samples_s"]) == 1
    assert set(out["growth"]) == OPERATIONS and len(out["load_average"]) == 3
    mongo = out["mongo_emulation"]
    assert mongo["facts"] == 100 and mongo["documents"] > 100
    assert all(mongo[op]["queries"] > 0 and mongo[op]["examined"] >= 0 for op in ("export", "forget", "verify"))


def test_bad_sizes_are_a_clear_error():
    done = run_bench("admin_scale", "--facts", "ten")
    assert done.code == 2
    assert "--facts: expected sizes of at least 10 facts" in done.err
    done = run_bench("admin_scale", "--facts", "100", "--repeat", "0")
    assert done.code == 2
    assert "--repeat: expected at least 1, got 0" in done.err
