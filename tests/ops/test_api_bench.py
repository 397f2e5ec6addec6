"""``python -m bench.api`` runs end to end on a short budget and prints its figures as JSON: the
in-process calls, each HTTP point with its ratio to them and the load average, and the aims."""

from __future__ import annotations

import json
import subprocess
import sys

from testkit.demo_store import demo_env, formed_demo_store
from testkit.procs import REPO_ROOT


def test_the_api_bench_prints_each_point_with_its_ratio_and_the_aims(tmp_path_factory):
    store = formed_demo_store(tmp_path_factory)
    done = subprocess.run(
        [sys.executable, "-m", "bench.api", "--workers", "1", "--clients", "2", "--seconds", "0.5", "--warmup", "0.1",
         "--store", str(store), "--json"],
        cwd=REPO_ROOT, env=demo_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["settings"]["rate_limit_per_minute"] == 0 and result["settings"]["embedder"] == "hashing-384"
    assert set(result["in_process"]) == {"context", "search"}
    for name in ("context", "search", "mcp_context"):
        assert result["in_process"][name.removeprefix("mcp_")]["requests"] > 0
        points = result["http"]["workers_1"][name]
        assert set(points) == {"clients_1", "clients_2"}
        for point in points.values():
            assert point["requests"] > 0 and point["errors"] == 0, point
            assert point["p50_ms"] <= point["p95_ms"] and len(point["load_average"]) == 3
            assert point["throughput_vs_in_process"] > 0
    aims = result["aims"]
    assert aims["http_added_p50_ms_cached_context"] is not None and aims["cached_context_rps_2_workers"] is None
    assert len(result["load_average"]) == 3
