"""Scenario-only Celery entry point: ``celery -A testkit.scenarios.worker_app worker ...``.

It is ``workers.app`` with two changes that only the reliability harness needs:
- abandoned messages are looked for every second (kombu's default sweep runs about every
  100 s), and the sweep's mutex expires after 5 s, so a redelivery after a killed worker
  shows up within the scenario;
- when ``RELIABILITY_MODE`` is set, each pool process gets the scenario dependencies of
  ``testkit.scenarios.deps`` (kill-point hooks, fault injection, or the
  idempotency-off control).
"""

from __future__ import annotations

import os

from celery.signals import worker_process_init

import workers.deps  # noqa: F401 - its per-process reset must run before the hook below
from workers.app import app

app.conf.broker_transport_options = {
    **(app.conf.broker_transport_options or {}),
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
    # the harness SIGKILLs workers, one of them possibly while it holds the restore mutex;
    # kombu's default keeps that mutex (and so every redelivery) for 300 s
    "unacked_mutex_expire": 5,
}


@worker_process_init.connect
def _install_bench_deps(**_: object) -> None:
    if os.environ.get("RELIABILITY_MODE"):
        from testkit.scenarios.deps import install_from_env

        install_from_env()


__all__ = ["app"]
