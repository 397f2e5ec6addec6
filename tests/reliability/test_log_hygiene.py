"""Workers at INFO, with provider keys set and faults whose answers carry conversation text,
log neither a key nor a message's content; hostile events sent straight onto the queue are
rejected and recorded, the hostile-but-valid ones stored verbatim, and no worker crashes."""

from __future__ import annotations

import pytest

from testkit.scenarios.checks import log_leaks_above_debug
from testkit.scenarios.logs import run_log_hygiene

pytestmark = pytest.mark.integration


def test_worker_logs_at_info_hold_no_key_and_no_message_text(tmp_path, needs_redis):
    figures = run_log_hygiene(tmp_path, sessions=3, fuzz=24, seed=31)
    assert figures["settled"], figures
    assert figures["faults_injected"].get("truncated", 0) > 0, "no answer carrying memory text was injected"
    assert figures["log_lines"] > 100
    assert figures["leaks"] == 0, figures["leak_sample"]
    assert figures["rejections_recorded"] == figures["rejections_expected"] > 0, figures
    assert figures["hostile_accepted_stored"] == figures["hostile_accepted_expected"], figures
    assert figures["worker_crashes"] == 0


def test_the_leak_check_ignores_debug_lines_and_finds_the_rest():
    lines = [
        "[2026-01-01 00:00:00,000: DEBUG/MainProcess] body: secret-text",
        "[2026-01-01 00:00:00,000: INFO/ForkPoolWorker-1] retry: answer began 'secret-text'",
        "[2026-01-01 00:00:00,000: WARNING/MainProcess] nothing to see",
    ]
    assert log_leaks_above_debug(lines, ["secret-text"]) == [lines[1]]
