"""``bench.admin_scale``: every operation runs in its own process on a built store and the
report holds its time, peak RSS, the growth between sizes and the load average."""

from __future__ import annotations

import json

from bench import admin_scale


def test_the_bench_times_every_operation_at_each_size(capsys):
    assert admin_scale.main(["--facts", "100", "--mongo"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out["sizes"]["100"]
    assert set(admin_scale.OPERATIONS) <= set(row)
    assert all(row[op]["peak_rss_mb"] > 0 and row[op]["seconds"] >= 0 for op in admin_scale.OPERATIONS)
    assert row["export"]["detail"] > 0 and row["forget"]["detail"] == 10 and row["verify"]["detail"] is True
    assert row["cost"]["detail"] == 200  # the window holds the two probed runs (a call of 100 input tokens each)
    assert len(row["export"]["samples_s"]) == 3 and len(row["forget"]["samples_s"]) == 1
    assert set(out["growth"]) == set(admin_scale.OPERATIONS) and len(out["load_average"]) == 3
    mongo = out["mongo_emulation"]
    assert mongo["facts"] == 100 and mongo["documents"] > 100
    assert all(mongo[op]["queries"] > 0 and mongo[op]["examined"] >= 0 for op in ("export", "forget", "verify"))


def test_bad_sizes_are_a_clear_error(capsys):
    assert admin_scale.main(["--facts", "ten"]) == 2
    assert "--facts: expected sizes of at least 10 facts" in capsys.readouterr().err
    assert admin_scale.main(["--facts", "100", "--repeat", "0"]) == 2
    assert "--repeat: expected at least 1, got 0" in capsys.readouterr().err
