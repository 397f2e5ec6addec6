"""``bench.small_store`` on a tiny LoCoMo-shaped file: every form of question is asked and
an exact distinctive word finds its fact."""

from __future__ import annotations

import json

import pytest

from testkit.benches import run_bench
from tests.ops.test_locomo_formation import SAMPLE


def test_the_bench_reports_each_store_size_and_a_distinctive_word_finds_its_fact(tmp_path):
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    out = run_bench("small_store", "--data", str(data), "--json").figures
    for size in ("5", "20", "100"):
        row = out[size]
        assert row["full"]["questions"] == 3 and row["entity"]["questions"] == 3
        assert row["entity_unique"]["questions"] >= 1 and row["entity_unique"]["hit_rate"] == 1.0
    assert len(out["setup"]["load_average"]) == 3 and out["setup"]["thresholds"]["text"] == 1.5


def test_a_missing_data_file_is_a_clear_error(tmp_path):
    done = run_bench("small_store", "--data", str(tmp_path / "nope.json"))
    assert done.code == 2
    assert "no such file" in done.err


@pytest.mark.parametrize("bench", ["small_store", "locomo_retrieval"])
@pytest.mark.parametrize(("content", "said"), [
    ("{not json", "not JSON"),
    (b"\xff\xfe\x00binary", "not JSON"),
    ('{"conversations": []}', "a JSON dict, not a list of conversations"),
])
def test_a_data_file_that_is_not_a_list_of_conversations_is_a_clear_error(tmp_path, bench, content, said):
    data = tmp_path / "bad.json"
    data.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = run_bench(bench, "--data", str(data))
    assert done.code == 2
    assert said in done.err and str(data) in done.err and "Traceback" not in done.err


def test_an_unknown_model_is_a_clear_error(tmp_path):
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([SAMPLE]))
    done = run_bench("locomo_retrieval", "--data", str(data), "--models", "all-MiniLM-L6-v2-int8,bert")
    assert done.code == 2 and "--models: unknown ['bert']" in done.err
