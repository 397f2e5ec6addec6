"""``workers.envelope``: which hand-built messages a worker can run, and the record of one it
cannot (docs/producers.md "Producers in any language")."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from workers import envelope


def _good(**change) -> dict:
    body = base64.b64encode(json.dumps([[], {"event": {"event_id": "e1"}}, {}]).encode()).decode()
    message = {"body": body, "content-type": "application/json", "content-encoding": "utf-8",
               "headers": {"task": "memory.ingest_event", "id": "t-1"},
               "properties": {"delivery_tag": "d-1", "delivery_info": {"exchange": "", "routing_key": "ingest"},
                              "body_encoding": "base64"}}
    message.update(change)
    return message


@pytest.mark.parametrize(("message", "reason"), [
    (_good(), None),
    (_good(body='[[], {"event": {}}, {}]', properties={"delivery_tag": "d", "delivery_info": {}}), None),
    (_good(body="[[], {}, null]", properties={"delivery_tag": "d", "delivery_info": {}}), None),
    (["a", "list"], "the envelope is a JSON list, not an object"),
    (_good(properties={"delivery_info": {}}), "properties.delivery_tag (a string) and properties.delivery_info"),
    (_good(headers={"id": "t"}), "headers.task and headers.id (strings) are required"),
    (_good(**{"content-type": "application/x-python-serialize"}), "content-type must be application/json"),
    (_good(body=7), "body must be a string"),
    (_good(body="%%%"), "the body is not base64 of UTF-8 text"),
    (_good(body=base64.b64encode(b"{oops").decode()), "the body is not JSON"),
    (_good(body=base64.b64encode(b'{"event": 1}').decode()), "the body must be the JSON array [args, kwargs, embed]"),
    (_good(properties={"delivery_tag": "d", "delivery_info": {}, "body_encoding": "gzip"}),
     "properties.body_encoding must be base64 or absent"),
])
def test_a_message_is_runnable_or_says_why_not(message, reason):
    problem = envelope.message_problem(message, "ingest")
    assert (problem is None) if reason is None else problem.startswith(reason)


def test_a_reply_list_needs_only_the_envelope():
    # a reply to `celery inspect` / `ping`: kombu's envelope around a JSON object, no task
    reply = _good(headers={"ticket": "t-1"}, body=base64.b64encode(b'{"celery@h": {"ok": "pong"}}').decode())
    assert envelope.message_problem(reply, "3f0c.reply.celery.pidbox") is None
    assert envelope.message_problem(reply, "ingest").startswith("headers.task and headers.id")
    assert envelope.message_problem({"body": "x"}, "3f0c.reply.celery.pidbox").startswith("properties.delivery_tag")


def test_an_undeliverable_message_is_recorded_with_its_raw_text(worker_deps):
    deps = worker_deps()
    assert envelope.set_aside("ingest", "not json at all", "not a kombu envelope") is True
    [rejected] = deps.store.ingest.list_rejections()
    assert rejected.raw == "not json at all"
    assert rejected.errors == [{"field": "<message>", "reason": "undeliverable message on queue ingest: not a kombu envelope"}]


class _DownIngest:
    def record_rejection(self, rejected):
        raise ConnectionError("store unreachable")


class _DownStore:
    ingest = _DownIngest()


def test_when_the_store_cannot_take_the_record_the_caller_is_told_to_keep_the_message(worker_deps, caplog):
    deps = worker_deps()
    store, deps.__dict__["store"] = deps.store, _DownStore()
    try:
        with caplog.at_level(logging.ERROR, logger="memory.broker"):
            assert envelope.set_aside("ingest", "not json at all", "not a kombu envelope") is False
    finally:
        deps.__dict__["store"] = store
    assert "could not be recorded, it waits in Redis" in caplog.text
