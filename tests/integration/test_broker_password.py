"""A broker password with URL-reserved characters (``@ : / ? #``) works end to end when given
as ``MEMORY_BROKER_PASSWORD`` (the compose file's way): a producer publishes, a worker stores
the event and Flower reads the queue depths, all on a real ``redis-server`` that requires it."""

from __future__ import annotations

import subprocess

import pytest
import redis

from testkit.procs import free_port, redis_server_path
from pipeline import names
from pipeline.store import open_store
from schemas.settings import Settings
from testkit.flower import FlowerProcess, api, until
from workers.producer import CeleryPublisher, publish_message

PASSWORD = "p@ss:w/rd?#frag%41"


@pytest.fixture
def locked_redis(tmp_path):
    """A redis-server whose ``requirepass`` is ``PASSWORD``; yields its port."""
    yield from _locked_redis(tmp_path, PASSWORD)


def _locked_redis(tmp_path, password: str):
    binary = redis_server_path()
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    with open(tmp_path / "redis.log", "ab") as log:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(tmp_path), "--requirepass", password],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=5)

    def ready():
        try:
            return client.ping()
        except redis.RedisError:
            return False

    until(ready, "the password-protected redis-server", tmp_path / "redis.log", timeout=20)
    yield port
    proc.terminate()
    proc.wait(timeout=10)


def test_a_broker_password_with_reserved_characters_works_for_producer_worker_and_flower(
    locked_redis, tmp_path, monkeypatch, celery_app_for, celery_worker_process
):
    broker_url = f"redis://127.0.0.1:{locked_redis}/0"
    monkeypatch.setenv("MEMORY_BROKER_PASSWORD", PASSWORD)
    app = celery_app_for(broker_url)

    flower = FlowerProcess(tmp_path, broker_url, extra_env={"MEMORY_BROKER_PASSWORD": PASSWORD})
    try:
        publisher = CeleryPublisher(app=app, retry_max=0)
        event_id = publish_message(agent_id="a1", session_id="s1", role="user", sender_id="u1",
                                   content="hello", publisher=publisher)
        publisher.close()
        status, body = api(flower.port, "/api/queues/length")
        assert status == 200, flower.log_text()[-2000:]
        assert {q["name"]: q["messages"] for q in body["active_queues"]}[names.QUEUE_INGEST] == 1
    finally:
        flower.stop()

    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    worker = celery_worker_process(store_url=store_url, broker_url=broker_url,
                                   extra_env={"MEMORY_BROKER_PASSWORD": PASSWORD})
    store = open_store(Settings(store_url=store_url))
    try:
        until(lambda: store.ingest.count_messages("s1") == 1, f"event {event_id} stored", worker.log_file)
    finally:
        store.close()


RAW_PASSWORD = "p@ss:w@rd%"


@pytest.fixture
def raw_url_redis(tmp_path):
    """A redis-server whose ``requirepass`` is ``RAW_PASSWORD``; yields its port."""
    yield from _locked_redis(tmp_path, RAW_PASSWORD)


def test_a_redis_url_with_a_raw_at_sign_in_its_password_publishes_and_the_worker_stores(
    raw_url_redis, tmp_path, celery_app_for, celery_worker_process
):
    """Written into the URL as it is, the way redis-py and kombu read it (schemas.urls)."""
    broker_url = f"redis://:{RAW_PASSWORD}@127.0.0.1:{raw_url_redis}/0"
    publisher = CeleryPublisher(app=celery_app_for(broker_url), retry_max=0)
    event_id = publish_message(agent_id="a1", session_id="s1", role="user", sender_id="u1",
                               content="hello", publisher=publisher)
    publisher.close()
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    worker = celery_worker_process(store_url=store_url, broker_url=broker_url)
    store = open_store(Settings(store_url=store_url))
    try:
        until(lambda: store.ingest.count_messages("s1") == 1, f"event {event_id} stored", worker.log_file)
    finally:
        store.close()
    assert RAW_PASSWORD not in worker.log_file.read_text(errors="replace")
