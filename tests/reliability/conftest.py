"""Reliability scenarios: real ``redis-server`` and ``celery worker`` processes where the
scenario needs them (marked ``integration``); they skip without redis-server unless CI is set."""

from __future__ import annotations

import os

import pytest

from tests.support.procs import redis_server_path


@pytest.fixture
def needs_redis() -> None:
    if redis_server_path() is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is required in CI (env CI is set); install it (apt-get install redis-server)")
        pytest.skip("redis-server is not installed; the reliability scenarios on real processes run in CI")
