"""``memoryctl caps``: caps set per agent, refused with why, shown with the rule on unpriced
spend, and cleared."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_memoryctl_caps_sets_and_shows_the_caps(tmp_path):
    env = {**os.environ, "MEMORY_STORE_URL": f"sqlite:///{tmp_path / 'm.db'}"}

    def ctl(*args):
        return subprocess.run([sys.executable, "-m", "ops.cli", *args], env=env, capture_output=True, text=True)

    assert ctl("create-indexes").returncode == 0
    assert ctl("caps", "set", "--agent", "a1", "--day-soft", "4", "--day-hard", "5").returncode == 0
    refused = ctl("caps", "set", "--agent", "a1", "--day-soft", "6", "--day-hard", "5")
    assert refused.returncode == 2 and "soft_usd (6.0) is above hard_usd (5.0)" in refused.stderr
    shown = ctl("caps", "show")
    assert "agent a1: ok (caps from set)" in shown.stdout and "soft 4.00, hard 5.00" in shown.stdout
    assert "only priced spend counts" in shown.stdout
    cleared = ctl("caps", "clear", "--agent", "a1", "--json")
    assert json.loads(cleared.stdout) == {"agent_id": "a1", "caps": None}
    assert json.loads(ctl("caps", "show", "--json").stdout)["agents"] == []
