"""Shared fixtures. Integration fixtures (real redis-server, real Celery worker) live in
``tests/integration/conftest.py``.

- ``celery_app_for`` (function): ``make(broker_url, result_backend=None)`` -> a Celery app
  built by ``workers.app.create_app`` with that broker and result backend (none when not
  given), for publishing from the test process; the process-wide settings are left as they
  were.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def celery_app_for(monkeypatch):
    from schemas.settings import get_settings

    apps = []

    def make(broker_url: str, result_backend: str | None = None):
        from workers.app import create_app

        with monkeypatch.context() as patch:
            patch.setenv("MEMORY_BROKER_URL", broker_url)
            if result_backend is None:
                patch.delenv("MEMORY_RESULT_BACKEND", raising=False)
            else:
                patch.setenv("MEMORY_RESULT_BACKEND", result_backend)
            get_settings.cache_clear()
            try:
                app = create_app()
            finally:
                get_settings.cache_clear()
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
