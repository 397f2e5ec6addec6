"""Every Redis URL the settings accept gets the reliable pop of ``workers/transport.py``: a
real worker on a real ``redis-server`` serving TLS only (``rediss://``) and on a master found
through a real Redis Sentinel (``sentinel://``) takes its messages with ``BLMOVE`` and the pop
script, never with kombu's ``BRPOP`` (whose lost-pop window that module closes). A Redis-like
URL the transports cannot serve is refused at worker start with one line naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis
from kombu import Connection

from pipeline import names
from pipeline.store import open_store
from schemas.settings import Settings
from testkit.flower import until
from testkit.procs import REPO_ROOT, RedisSentinel, RedisServer
from testkit.tls import make_certificates
from workers.producer import CeleryPublisher, publish_message


@pytest.fixture
def tls_redis(tmp_path, redis_server):  # redis_server: skips (fails in CI) without redis-server
    files = make_certificates(tmp_path / "tls")
    with RedisServer(tmp_path / "redis-tls", databases=4, tls=files) as server:
        yield server


@pytest.fixture
def sentinel(tmp_path, redis_server):
    with RedisServer(tmp_path / "redis-master", databases=4) as master:
        with RedisSentinel(tmp_path / "sentinel", master) as watching:
            yield master, watching


def _command_calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def _assert_reliable_pops(server: redis.Redis, messages: int, scheme: str) -> None:
    """Each message was taken by the pop script (one ``EVAL`` per take), after a ``BLMOVE`` that
    waits without taking, and none by kombu's ``BRPOP``. How many ``BLMOVE`` calls the server has
    counted by now depends on timing (a wait still blocked is counted when it ends), so only
    its use is checked, not one per message."""
    assert _command_calls(server, "eval") >= messages
    assert _command_calls(server, "blmove") >= 1
    assert _command_calls(server, "brpop") == 0, f"kombu's stock pop served a {scheme} worker"


def _publish_and_wait_stored(app, store_url: str, worker, session_id: str, count: int = 3) -> None:
    publisher = CeleryPublisher(app=app, retry_max=0)
    try:
        for n in range(count):
            publish_message(agent_id="a1", session_id=session_id, role="user", sender_id="u1",
                            content=f"message {n}", publisher=publisher)
    finally:
        publisher.close()
    store = open_store(Settings(store_url=store_url))
    try:
        until(lambda: store.ingest.count_messages(session_id) == count, f"{count} events stored", worker.log_file, timeout=60)
    finally:
        store.close()


def test_a_rediss_worker_pops_reliably_over_tls(tls_redis, store_url, celery_app_for, celery_worker_process):
    url = f"{tls_redis.url(0)}?ssl_cert_reqs=required&ssl_ca_certs={tls_redis.tls.ca}"
    worker = celery_worker_process(broker_url=url, result_backend=url, store_url=store_url,
                                   queues=(names.QUEUE_INGEST,), concurrency=1)
    server = tls_redis.client(0)
    server.config_resetstat()  # from here on (readiness probes read their replies with BRPOP)
    _publish_and_wait_stored(celery_app_for(url), store_url, worker, "s-tls")

    _assert_reliable_pops(server, 3, "rediss://")
    assert server.hlen("unacked") == 0


def test_a_rediss_url_without_tls_options_verifies_the_server_certificate(tls_redis, celery_app_for):
    """kombu alone connects to any certificate (with a warning); a self-signed server is
    refused unless the URL names its authority (``ssl_ca_certs``) or opts out (``ssl_cert_reqs=none``)."""
    app = celery_app_for(tls_redis.url(0))
    with app.connection_for_write() as conn, pytest.raises(Exception) as refused:
        conn.ensure_connection(max_retries=0)
    assert "certificate verify failed" in str(refused.value)

    trusting = celery_app_for(f"{tls_redis.url(0)}?ssl_ca_certs={tls_redis.tls.ca}")
    with trusting.connection_for_write() as conn:
        conn.ensure_connection(max_retries=0)
        assert conn.transport.driver_type == "redis"


def test_a_sentinel_worker_pops_reliably_from_the_master_it_names(
        sentinel, store_url, monkeypatch, celery_app_for, celery_worker_process):
    master, watching = sentinel
    url = f"{watching.url}/0"
    monkeypatch.setenv("MEMORY_BROKER_SENTINEL_MASTER", watching.master_name)
    worker = celery_worker_process(broker_url=url, result_backend=master.url(1), store_url=store_url,
                                   queues=(names.QUEUE_INGEST,), concurrency=1,
                                   extra_env={"MEMORY_BROKER_SENTINEL_MASTER": watching.master_name})
    server = master.client(0)
    server.config_resetstat()
    _publish_and_wait_stored(celery_app_for(url), store_url, worker, "s-sentinel")

    _assert_reliable_pops(server, 3, "sentinel://")
    assert server.hlen("unacked") == 0


def test_the_llm_slot_client_reaches_the_master_a_sentinel_names(sentinel):
    from pipeline.llm.broker_redis import broker_redis

    master, watching = sentinel
    client = broker_redis(Settings(broker_url=f"{watching.url}/2", broker_sentinel_master=watching.master_name))
    client.set("probe", "1")
    assert master.client(2).get("probe") == b"1"
    assert client.info("replication")["role"] == "master"


@pytest.mark.parametrize("env, setting", [
    ({"MEMORY_BROKER_URL": "sentinel://127.0.0.1:26379/0"}, "MEMORY_BROKER_SENTINEL_MASTER"),
    ({"MEMORY_BROKER_URL": "redis://127.0.0.1:6379/0", "MEMORY_BROKER_SENTINEL_MASTER": "mymaster"},
     "MEMORY_BROKER_SENTINEL_MASTER"),
    ({"MEMORY_BROKER_URL": "redis+socket:///run/redis.sock"}, "MEMORY_BROKER_URL"),
], ids=["sentinel-without-master", "master-without-sentinel", "unsupported-scheme"])
def test_a_broker_url_the_transports_cannot_serve_is_refused_at_start_in_one_line(env, setting, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "-Q", names.QUEUE_INGEST, "--pool", "solo"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "MEMORY_STORE_URL": f"sqlite:///{tmp_path / 'm.db'}", **env})
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert setting in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("scheme, expected", [("redis", "Transport"), ("rediss", "Transport"),
                                              ("sentinel", "SentinelTransport")])
def test_every_redis_scheme_kombu_knows_resolves_to_a_reliable_transport(scheme, expected):
    import workers.app  # noqa: F401 - registers the transports, as a worker does
    from workers import transport

    with Connection(f"{scheme}://127.0.0.1:6379/0") as conn:
        assert conn.get_transport_cls() is getattr(transport, expected)
