"""The soak bench's layout and arithmetic: the compose file's workers, sized for this machine,
and the slope it reports (its run itself is a benchmark, not a test)."""

from __future__ import annotations

import os

import pytest

from testkit.soak import DEMO, LOCOMO, compose_workers, slope, turns


def test_the_layout_is_one_worker_per_queue_class_of_the_compose_file():
    layout = {w["name"]: w for w in compose_workers()}
    assert set(layout) == {"ingest", "formation", "consolidation", "maintenance"}
    assert {q for w in layout.values() for q in w["queues"]} == {"ingest", "formation", "consolidation", "maintenance"}
    assert layout["formation"]["pool"] == "threads"
    assert all(w["concurrency"] <= (os.cpu_count() or 1) for w in layout.values() if w["pool"] == "prefork")


@pytest.mark.parametrize("points, expected", [
    ([(0, 10), (60, 10), (120, 10)], 0.0),          # flat
    ([(0, 10), (60, 11), (120, 12)], 1.0),          # 1 per minute
    ([(0, 100), (30, 90), (60, 80)], -20.0),
    ([(0, 5)], None),                               # one sample says nothing
])
def test_the_slope_is_per_minute(points, expected):
    assert slope(points) == expected


def test_the_producer_s_turns_come_from_the_data_or_the_demo_conversation(tmp_path):
    assert len(turns(tmp_path / "missing.json")) == len(turns(DEMO)) > 0
    if LOCOMO.exists():
        assert len(turns(LOCOMO)) > 1000
