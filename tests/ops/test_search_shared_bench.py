"""``bench.search_shared``: processes that map one segment's files hold less privately than
processes that each hold a copy, and the figures come with the load average."""

from __future__ import annotations

import json

from bench import search_shared


def test_mapped_segments_are_shared_and_private_copies_are_not(capsys):
    assert search_shared.main(["--facts", "5000", "--processes", "2", "--queries", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    mapped, private = out["mapped"]["processes=2"], out["private"]["processes=2"]
    assert mapped["uss"] < private["uss"] / 2
    assert mapped["pss"] < private["pss"]
    assert len(out["setup"]["load_average"]) == 3 and out["setup"]["files_mb"] > 0
