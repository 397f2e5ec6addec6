"""How every bench ends (``bench/output.py``), seen as a user runs one: a few lines for a
reader and then the figures as one JSON object on the last line; with ``--json``, that line
alone."""

from __future__ import annotations

import json

from testkit.benches import run_bench

SMALL = ("--facts", "4096", "--queries", "10", "--threads", "1", "--concurrency", "1")


def test_the_figures_come_last_as_one_json_line_after_the_readers_lines():
    run = run_bench("search_scan", *SMALL)
    lines = run.out.strip().splitlines()
    assert run.code == 0 and len(lines) > 1
    figures = json.loads(lines[-1])
    assert "threads=1" in figures and "setup" in figures
    assert all(not line.startswith("{") for line in lines[:-1])


def test_with_json_only_the_figures_are_printed():
    run = run_bench("search_scan", *SMALL, "--json")
    lines = run.out.strip().splitlines()
    assert run.code == 0 and len(lines) == 1
    assert "threads=1" in json.loads(lines[0])
