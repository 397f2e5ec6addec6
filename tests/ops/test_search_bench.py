"""``bench.search --cache-sweep``: more agents than the segment cache can hold are
searched in turn, and the cache's bytes stay under ``MEMORY_SEARCH_CACHE_MB``."""

from __future__ import annotations

from testkit.benches import run_bench


def test_the_cache_sweep_holds_the_cache_under_its_setting_while_it_evicts():
    out = run_bench("search", "--cache-sweep", "--agents", "6", "--agent-facts", "2000",
                    env={"MEMORY_SEARCH_CACHE_MB": "10"}).figures
    sweep = out["cache_sweep"]
    assert sweep["cache_mb_setting"] == 10 and sweep["searches"] == 12
    # six segments of ~3.9 MB would be ~23 MB: the cache evicted to stay under its 10 MB
    assert 3 < sweep["segment_mb"] < 10 and sweep["held_mb_max"] <= 10
    assert sweep["held_mb_max"] >= 2 * sweep["segment_mb"]  # it did hold more than one
    assert len(out["load_average"]) == 3


def test_bad_sweep_sizes_are_a_clear_error():
    done = run_bench("search", "--cache-sweep", "--agents", "0")
    assert done.code == 2
    assert "--agents must be >= 1" in done.err
