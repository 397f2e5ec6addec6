"""``bench.search_shared``: processes that map one segment's files hold less privately than
processes that each hold a copy, and the figures come with the load average."""

from __future__ import annotations

from testkit.benches import run_bench


def test_mapped_segments_are_shared_and_private_copies_are_not():
    out = run_bench("search_shared", "--facts", "5000", "--processes", "2", "--queries", "3", "--json").figures
    mapped, private = out["mapped"]["processes=2"], out["private"]["processes=2"]
    assert mapped["uss"] < private["uss"] / 2
    assert mapped["pss"] < private["pss"]
    assert len(out["setup"]["load_average"]) == 3 and out["setup"]["files_mb"] > 0
