"""Shared fixtures. Integration fixtures (real redis-server, real Celery worker) live in
``tests/integration/conftest.py``."""
