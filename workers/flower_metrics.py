"""Flower's ``/metrics`` behind the same credentials as the rest of Flower.

Flower 2.2 serves its Prometheus metrics through a handler that checks none
(``flower/views/monitor.py``: ``Metrics.get`` has no ``@web.authenticated``, unlike every API
handler in ``flower/api/``), so anyone who reaches the port reads the worker names, the task
names and their counts, states and run times. ``/healthcheck`` stays open: it answers "OK" and
nothing else, for the compose health check.

This module imports no Celery app, so both entry points (``workers.app`` under
``celery ... flower`` and ``workers.flower``) can apply it without importing each other.
"""

from __future__ import annotations

import tornado.web
from flower import urls
from flower.api import BaseApiHandler
from flower.views import monitor


class Metrics(monitor.Metrics):
    """``/metrics`` behind Flower's authentication (basic auth or its OAuth login)."""

    def prepare(self):
        # as every API handler: no credentials configured means no answer, unless the operator
        # opened the API on purpose with FLOWER_UNAUTHENTICATED_API
        BaseApiHandler.prepare(self)

    @tornado.web.authenticated
    async def get(self):
        await super().get()


def protect_metrics() -> None:
    """Swap Flower's ``/metrics`` handler for ``Metrics``, in the handler list Flower's
    application is built from (``flower.app`` imports that same list object). Idempotent."""
    for i, handler in enumerate(urls.handlers):
        if isinstance(handler, tuple) and handler[0] == r"/metrics":
            urls.handlers[i] = (r"/metrics", Metrics, *handler[2:])
            return
    raise RuntimeError("Flower has no /metrics handler to protect; check the installed Flower version")
