"""Reliability scenarios: real ``redis-server`` and ``celery worker`` processes where the
scenario needs them (marked ``integration``); they skip without redis-server unless CI is set."""

from __future__ import annotations

import pytest

from testkit.procs import require_redis_server


@pytest.fixture
def needs_redis() -> None:
    require_redis_server()
