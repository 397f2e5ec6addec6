"""``bench.throttle``: two real formation worker processes share one provider limit, counted
where the calls arrive (the wire-level fake provider)."""

from __future__ import annotations

from pipeline.llm.rates import SPACING
from testkit.benches import run_bench


def test_two_worker_processes_never_call_closer_than_the_shared_limit_allows():
    out = run_bench("throttle", "--limit", "120", "--sessions", "6", "--latency", "0.05", "--timeout", "120").figures
    assert out["runs_done"] == 6 and out["calls"] >= 12
    # 120 a minute is one call every 0.5 s (and a little): the calls spread over at least that
    # many gaps, whichever process made them (without a shared limit the two processes' 16
    # threads send the ready calls within a second). Only the first and the last call's delay
    # on the loaded machine can shorten the span, by well under a second.
    assert out["seconds"] >= (out["calls"] - 1) * 0.5 * SPACING - 1.0
    assert out["max_calls_in_any_minute"] <= 120
