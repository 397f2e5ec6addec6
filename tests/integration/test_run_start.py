"""Starting a claimed run needs the broker only (design §9): ``memoryctl replay-failed`` and
``MemoryService.process_cold_session`` enqueue the run's first stage with no result backend
anywhere (nothing listens on Redis's default port 6379 here), and a run whose start the broker
refuses is released for the stale-run retry instead of staying ``claimed``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from testkit.procs import REPO_ROOT, free_port
from testkit.sessions import ingest_messages
from pipeline import names, sweep
from pipeline.clock import FrozenClock
from pipeline.store import open_store
from schemas.settings import Settings


def _nothing_on_default_redis_port() -> None:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        if sock.connect_ex(("127.0.0.1", 6379)) == 0:
            pytest.skip("something listens on 127.0.0.1:6379; this test needs that port closed")


@pytest.fixture
def failed_run(tmp_path):
    """A SQLite store holding one failed run; yields (store URL, run id)."""
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    settings, clock = Settings(store_url=url), FrozenClock()
    store = open_store(settings)
    store.create_indexes()
    ingest_messages(store, settings, clock, "s1", content="hello there")
    clock.advance(minutes=10)
    [run_id] = sweep.sweep_cold_sessions(store, settings, clock.now()).run_ids
    store.runs.fail_run(run_id, "embedding service unavailable", clock.now(), dead=False)
    store.close()
    return url, run_id


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**base, "PYTHONPATH": str(REPO_ROOT), **env})


def _status(url: str, run_id: str) -> tuple[str, str | None]:
    store = open_store(Settings(store_url=url))
    try:
        run, session = store.runs.get_run(run_id), store.ingest.get_session("s1")
        return run.status, session.active_run_id
    finally:
        store.close()


def test_replay_failed_enqueues_the_run_with_no_result_backend(failed_run, broker_urls, redis_server):
    _nothing_on_default_redis_port()
    url, run_id = failed_run
    done = _run(["-m", "ops.cli", "replay-failed"], {"MEMORY_STORE_URL": url, "MEMORY_BROKER_URL": broker_urls[0]})
    assert done.returncode == 0, done.stderr
    assert "replayed 1 run(s)" in done.stdout and run_id in done.stdout
    broker = redis_server.client(int(broker_urls[0].rsplit("/", 1)[1]))
    assert broker.llen(names.QUEUE_FORMATION) == 1
    assert _status(url, run_id) == ("claimed", run_id)


def test_a_replay_the_broker_refuses_releases_the_run_and_says_why(failed_run, broker_urls):
    url, run_id = failed_run
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"
    done = _run(["-m", "ops.cli", "replay-failed"],
                {"MEMORY_STORE_URL": url, "MEMORY_BROKER_URL": dead_broker, "MEMORY_PUBLISH_RETRY_MAX": "0"})
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("memoryctl replay-failed: the broker at"), done.stderr
    assert dead_broker in line and "did not accept memory.extract_facts" in line
    assert f"run(s) {run_id} marked failed" in line
    assert _status(url, run_id) == ("failed", None)  # not stranded `claimed`: the session is free

    again = _run(["-m", "ops.cli", "replay-failed"], {"MEMORY_STORE_URL": url, "MEMORY_BROKER_URL": broker_urls[0]})
    assert again.returncode == 0 and "replayed 1 run(s)" in again.stdout, again.stderr


_COLD = """
import sys
from workers.client import memory_service
from pipeline.errors import TransientError
try:
    print(memory_service("a1").process_cold_session(session_id="s1"))
except TransientError as exc:
    print(f"error: {exc}")
"""


def test_process_cold_session_enqueues_the_run_with_no_result_backend(tmp_path, broker_urls, redis_server):
    _nothing_on_default_redis_port()
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    settings, clock = Settings(store_url=url), FrozenClock()
    store = open_store(settings)
    store.create_indexes()
    ingest_messages(store, settings, clock, "s1", content="hello there")
    store.close()
    # cold at once: the real clock of the subprocess is far past the frozen one's messages
    done = _run(["-c", _COLD], {"MEMORY_STORE_URL": url, "MEMORY_BROKER_URL": broker_urls[0]})
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert not run_id.startswith("error") and run_id != "None", done.stdout
    broker = redis_server.client(int(broker_urls[0].rsplit("/", 1)[1]))
    assert broker.llen(names.QUEUE_FORMATION) == 1
    assert _status(url, run_id) == ("claimed", run_id)


def test_process_cold_session_with_the_broker_gone_releases_its_claim(tmp_path):
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    settings, clock = Settings(store_url=url), FrozenClock()
    store = open_store(settings)
    store.create_indexes()
    ingest_messages(store, settings, clock, "s1", content="hello there")
    store.close()
    done = _run(["-c", _COLD], {"MEMORY_STORE_URL": url, "MEMORY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0",
                                "MEMORY_PUBLISH_RETRY_MAX": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("error: the broker at redis://127.0.0.1:")
    store = open_store(settings)
    try:
        [run] = store.runs.list_runs(session_id="s1")
        assert run.status == "failed" and run.error.startswith("not started")
        assert store.ingest.get_session("s1").active_run_id is None
    finally:
        store.close()
