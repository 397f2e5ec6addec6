"""Flower's entry point: ``celery -A workers.flower flower --basic-auth=user:password``.

It is ``workers.app`` with one change to Flower itself: ``/metrics`` asks for the same
credentials as the rest of Flower (``workers.flower_metrics``; ``celery -A workers.app flower``
applies the same change). ``/healthcheck`` stays open for the compose health check.

A Prometheus server scrapes it with the same user and password (``basic_auth`` in its
``scrape_config``).
"""

from __future__ import annotations

from workers.app import app
from workers.flower_metrics import protect_metrics

protect_metrics()

__all__ = ["app"]
