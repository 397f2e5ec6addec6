"""``bench.output.print_result``: how every bench ends, a few lines for a reader and then the
figures as one JSON object on the last line."""

from __future__ import annotations

import json

from bench.output import print_result


def test_the_figures_come_last_as_one_json_line_after_the_readers_lines(capsys):
    assert print_result({"p50_ms": 1.5, "load_average": [0.1, 0.2, 0.3]}, ["first", "second"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["first", "second"]
    assert json.loads(lines[-1]) == {"p50_ms": 1.5, "load_average": [0.1, 0.2, 0.3]} and len(lines) == 3


def test_with_json_only_the_lines_are_never_built(capsys):
    def lines():
        raise AssertionError("built although only the JSON line is printed")
        yield ""

    print_result({"n": 1}, lines(), json_only=True)
    assert capsys.readouterr().out == '{"n": 1}\n'
