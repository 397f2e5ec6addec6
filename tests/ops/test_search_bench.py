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


def test_the_embedders_comparison_reports_both_models_side_by_side(tmp_path):
    import json

    from tests.ops.test_locomo_formation import SAMPLE

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    out = run_bench("search", "--embedders", "--data", str(data), "--facts", "300", "--queries", "10",
                    "--json").figures
    e5, minilm = out["models"]["multilingual-e5-small-q4"], out["models"]["all-MiniLM-L6-v2-int8"]
    assert {"query_ms_threads_1", "query_ms_threads_2", "batch_texts_per_s_threads_2"} <= set(e5)
    assert {"query_ms_threads_2", "rss_added_mb", "search_ms_with_query_embedding"} <= set(minilm)
    assert set(out["search_ms_without_embedding"]) == {"p50", "p95"} and len(out["load_average"]) == 3


def test_the_embedders_comparison_needs_its_questions():
    done = run_bench("search", "--embedders")
    assert done.code == 2 and "--embedders needs --data" in done.err
