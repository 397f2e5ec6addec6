"""Integration fixtures: a real ``redis-server`` and real ``celery worker`` processes.

- ``redis_server`` / ``redis_url`` (session): one ``redis-server`` on a free port with no
  persistence, killed at teardown. ``redis_url`` is its base URL without a database number
  (``redis://127.0.0.1:PORT``); append ``/N`` for a database. Missing ``redis-server`` skips the
  test on a laptop and FAILS it when the ``CI`` environment variable is set.
- ``broker_urls`` (function): a fresh (broker, result backend) pair of database numbers on that
  server, so each test starts with empty queues.
- ``celery_worker_process`` (function): a factory that starts ``celery -A workers.app worker``
  subprocesses, waits until each is ready and returns an ``testkit.procs.WorkerProcess`` handle
  (``.stop()``, ``.kill(sig)``, ``.kill_group(sig)``, ``.child_pids()``, ``.log_text()``,
  ``.env``). Every worker it started and left running is killed at teardown (SIGKILL to its
  process group: a warm shutdown nobody checks costs ~2.5 s a test).
- ``celery_app_for`` (``tests/conftest.py``): a Celery app built like ``workers.app`` for a given
  broker and result backend, for publishing from the test process (``CeleryPublisher(app=...)``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from testkit.procs import RedisServer, WorkerProcess, require_redis_server

pytestmark = pytest.mark.integration

_DATABASES = 256
_db_pairs = itertools.count(0)


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> RedisServer:
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis"), databases=_DATABASES)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server) -> str:
    """Base URL of the session's redis-server, without a database number."""
    return redis_server.base_url


@pytest.fixture
def store_url(tmp_path) -> str:
    """An empty SQLite store with its indexes, for a worker process to open by URL."""
    from pipeline.store import open_store
    from schemas.settings import Settings

    url = f"sqlite:///{tmp_path / 'memory.db'}"
    store = open_store(Settings(store_url=url))
    store.create_indexes()
    store.close()
    return url


@pytest.fixture
def broker_urls(redis_server) -> tuple[str, str]:
    """A fresh pair of database numbers: (broker URL, result backend URL)."""
    pair = next(_db_pairs) % (_DATABASES // 2)
    broker, backend = redis_server.url(2 * pair), redis_server.url(2 * pair + 1)
    for db in (2 * pair, 2 * pair + 1):
        redis_server.client(db).flushdb()
    return broker, backend


@pytest.fixture
def celery_worker_process(tmp_path, broker_urls):
    """Factory: ``start(store_url=..., queues=("ingest",), pool="prefork", concurrency=2,
    extra_env=None, log_file=None, broker_url=None, result_backend=None, loglevel="INFO",
    hostname=None, extra_args=(), app="workers.app", ready_timeout=90, wait=True)``.

    Broker and backend default to this test's ``broker_urls``. The store URL defaults to a
    SQLite file in the test's tmp dir. Returns a ready ``WorkerProcess``.
    """
    started: list[WorkerProcess] = []
    counter = itertools.count(1)

    def start(
        *,
        store_url: str | None = None,
        queues: Iterable[str] = ("ingest",),
        pool: str = "prefork",
        concurrency: int = 2,
        extra_env: Mapping[str, str] | None = None,
        log_file: str | Path | None = None,
        broker_url: str | None = None,
        result_backend: str | None = None,
        loglevel: str = "INFO",
        hostname: str | None = None,
        extra_args: Iterable[str] = (),
        app: str = "workers.app",
        ready_timeout: float = 90.0,
        wait: bool = True,
    ) -> WorkerProcess:
        n = next(counter)
        worker = WorkerProcess(
            broker_url=broker_url or broker_urls[0],
            result_backend=result_backend or broker_urls[1],
            store_url=store_url or f"sqlite:///{tmp_path / 'memory.db'}",
            log_file=Path(log_file) if log_file else tmp_path / f"worker-{n}.log",
            queues=queues,
            pool=pool,
            concurrency=concurrency,
            app=app,
            loglevel=loglevel,
            hostname=hostname,
            extra_env=extra_env,
            extra_args=extra_args,
        )
        started.append(worker)
        if wait:
            worker.wait_ready(timeout=ready_timeout)
        return worker

    yield start
    for worker in started:
        worker.discard()  # after the assertions: a test that checks the shutdown stops it itself
