"""A producer in another language writes the documented wire format with a plain Redis client
(no Celery, no kombu) and a real worker stores its events; a malformed hand-built message is
recorded as rejected, never lost, and never stops the worker (docs/producers.md "Producers in any
language")."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from pipeline import names
from pipeline.store import open_store
from schemas.settings import Settings
from testkit.flower import until

PAGE = Path(__file__).resolve().parents[2] / "docs" / "producers.md"


def _event(event_id: str, session_id: str = "s-foreign", content: str = "I moved to Porto") -> dict:
    return {"type": "message.added", "schema_version": 1, "event_id": event_id, "agent_id": "a1",
            "session_id": session_id,
            "message": {"message_id": event_id, "role": "user", "sender_id": "u1", "content": content,
                        "created_at": "2026-05-02T10:00:00+00:00"}}


def _envelope(task: str, kwargs: dict, *, base64_body: bool = True) -> str:
    """The documented envelope, built by hand with only the keys it lists as needed."""
    body = json.dumps([[], kwargs, {}])
    properties = {"delivery_tag": str(uuid.uuid4()), "delivery_info": {"exchange": "", "routing_key": "ingest"},
                  "priority": 0}
    if base64_body:
        body = base64.b64encode(body.encode()).decode()
        properties["body_encoding"] = "base64"
    return json.dumps({
        "body": body, "content-type": "application/json", "content-encoding": "utf-8",
        "headers": {"task": task, "id": str(uuid.uuid4()), "argsrepr": "()", "kwargsrepr": "{}"},
        "properties": properties,
    })


@pytest.fixture
def broker(redis_server, broker_urls):
    """A raw redis-py client on this test's broker database: what any language's client is."""
    return redis_server.client(int(broker_urls[0].rsplit("/", 1)[1]))


def _wait(store_url: str, check, what: str, worker):
    store = open_store(Settings(store_url=store_url))
    try:
        return until(lambda: check(store), what, worker.log_file, timeout=60)
    finally:
        store.close()


def test_a_hand_built_message_is_stored_by_a_real_worker(broker, store_url, celery_worker_process):
    broker.lpush(names.QUEUE_INGEST, _envelope(names.TASK_INGEST_EVENT, {"event": _event("e-1")}))
    broker.lpush(names.QUEUE_INGEST, _envelope(names.TASK_INGEST_EVENT, {"event": _event("e-2")}, base64_body=False))
    batch = [_event(f"e-b{i}") for i in range(3)]
    broker.lpush(names.QUEUE_INGEST, _envelope(names.TASK_INGEST_BATCH, {"events": batch}))
    worker = celery_worker_process(store_url=store_url, queues=(names.QUEUE_INGEST,))
    _wait(store_url, lambda s: s.ingest.count_messages("s-foreign") == 5, "5 hand-built events stored", worker)
    assert broker.llen(names.QUEUE_INGEST) == 0
    assert "ERROR" not in worker.log_text()


def _docs_redis_cli_line() -> str:
    [line] = [ln for ln in PAGE.read_text().splitlines() if ln.startswith('redis-cli -u "$MEMORY_BROKER_URL" LPUSH')]
    return line


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")
def test_the_docs_redis_cli_line_publishes_an_event_a_worker_stores(broker_urls, store_url, celery_worker_process):
    done = subprocess.run(["sh", "-c", _docs_redis_cli_line()], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "MEMORY_BROKER_URL": broker_urls[0]})
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    worker = celery_worker_process(store_url=store_url, queues=(names.QUEUE_INGEST,))
    _wait(store_url, lambda s: s.ingest.count_messages("cli-s1") == 1, "the redis-cli event stored", worker)


BROKEN = {
    "not JSON": "this is not json",
    "JSON without properties": json.dumps({"headers": {"task": names.TASK_INGEST_EVENT}, "body": "[]"}),
    "no task header": re.sub(r'"task": "[^"]+", ', "", _envelope(names.TASK_INGEST_EVENT, {"event": _event("x-1")})),
    "body not base64": json.dumps({**json.loads(_envelope(names.TASK_INGEST_EVENT, {"event": _event("x-2")})),
                                   "body": "%%% not base64 %%%"}),
    "body not [args, kwargs, options]": _envelope(names.TASK_INGEST_EVENT, {"event": _event("x-3")}).replace(
        base64.b64encode(json.dumps([[], {"event": _event("x-3")}, {}]).encode()).decode(),
        base64.b64encode(b'{"event": 1}').decode()),
}


@pytest.mark.parametrize("queues", [(names.QUEUE_INGEST,), names.QUEUES], ids=["one-queue", "all-queues"])
def test_malformed_hand_built_messages_are_recorded_as_rejected_not_lost(
    broker, store_url, celery_worker_process, queues
):
    for raw in BROKEN.values():
        broker.lpush(names.QUEUE_INGEST, raw)
    bad_event = '{"type": "message.added", "event_id": "bad-json", "agent_id": '  # cut off
    broker.lpush(names.QUEUE_INGEST, _envelope(names.TASK_INGEST_EVENT, {"event": bad_event}))
    broker.lpush(names.QUEUE_INGEST, _envelope(names.TASK_INGEST_EVENT, {"event": _event("good-after")}))
    worker = celery_worker_process(store_url=store_url, queues=queues)

    _wait(store_url, lambda s: s.ingest.count_messages("s-foreign") == 1, "the good event after the broken ones", worker)
    rejections = _wait(store_url, lambda s: (lambda r: r if len(r) == len(BROKEN) + 1 else None)(s.ingest.list_rejections()),
                       f"{len(BROKEN) + 1} rejections", worker)
    by_raw = {r.raw: r for r in rejections}
    for what, raw in BROKEN.items():
        assert raw in by_raw, f"{what}: not recorded"
        [error] = by_raw[raw].errors
        assert error["field"] == "<message>" and error["reason"].startswith("undeliverable message on queue ingest: ")
    assert by_raw[bad_event].errors[0]["field"] == "<event>"
    # the last message is acked just after its rejection is recorded: wait for the ack
    until(lambda: broker.hlen("unacked") == 0 or None, "every message acked", worker.log_file, timeout=30)
    assert broker.llen(names.QUEUE_INGEST) == 0
    assert broker.llen(f"{names.QUEUE_INGEST}:undeliverable") == 0
    assert worker.is_alive()


def _docs_node_example() -> tuple[str, str, list[list[str]]]:
    """(the file name, the module, the shell lines) of the Node.js producer in docs/producers.md."""
    text = PAGE.read_text()
    start = text.index("From Node.js")
    name = re.search(r"Save this as `([^`]+)`", text[start:]).group(1)
    code = text[text.index("```js\n", start) + len("```js\n"):]
    after = code[code.index("```"):]
    shell = after[after.index("```sh\n") + len("```sh\n"):]
    lines = [shlex.split(line, comments=True) for line in shell[:shell.index("```")].splitlines() if line.strip()]
    return name, code[:code.index("```")], lines


def _need(program: str) -> None:
    if shutil.which(program) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is required in CI (env CI is set): the Node.js producer of docs/producers.md is tested with it")
        pytest.skip(f"{program} is not installed: the Node.js producer of docs/producers.md cannot be run")


def test_the_docs_node_producer_runs_as_written_exits_and_its_event_is_stored(
    tmp_path, broker, broker_urls, store_url, celery_worker_process
):
    """Written to the file the page names, with the npm package it says to install (from the
    npm registry), against this test's redis-server, then consumed by a real ingest worker."""
    _need("node")
    _need("npm")
    name, code, lines = _docs_node_example()
    (tmp_path / name).write_text(code)
    env = {**os.environ, "MEMORY_BROKER_URL": broker_urls[0], "npm_config_audit": "false",
           "npm_config_fund": "false", "npm_config_update_notifier": "false"}
    install, run = lines
    assert install[:2] == ["npm", "install"], install
    done = subprocess.run(install, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert run[0].startswith("MEMORY_BROKER_URL=") and run[1:] == ["node", name], run
    try:
        done = subprocess.run(run[1:], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("the Node.js producer of docs/producers.md did not exit within 60 s (is its client closed?)")
    assert done.returncode == 0, done.stderr[-2000:]
    [raw] = broker.lrange(names.QUEUE_INGEST, 0, -1)
    assert "I moved to Porto" not in json.loads(raw)["headers"]["kwargsrepr"]
    worker = celery_worker_process(store_url=store_url, queues=(names.QUEUE_INGEST,))
    _wait(store_url, lambda s: s.ingest.count_messages("s1") == 1, "the Node.js producer's event stored", worker)
    assert broker.llen(names.QUEUE_INGEST) == 0


def test_replies_to_control_commands_are_not_taken_for_broken_task_messages(
    broker_urls, store_url, celery_worker_process, celery_app_for
):
    # replies come back on a list of their own, in kombu's envelope without a task header
    worker = celery_worker_process(store_url=store_url, queues=(names.QUEUE_INGEST,), hostname="pinged@%h")
    app = celery_app_for(*broker_urls)
    replies = until(lambda: app.control.ping(timeout=2), "a pong", worker.log_file, timeout=30)
    assert any(name.startswith("pinged@") for reply in replies for name in reply)
    store = open_store(Settings(store_url=store_url))
    try:
        assert store.ingest.list_rejections() == []
    finally:
        store.close()
