"""``workers.dispatch.send``, the one way a task is sent: results ignored, no result backend,
arguments shown to monitoring as ids and sizes, a lost broker reported without them."""

from __future__ import annotations

import pytest
from celery.backends.base import DisabledBackend

from testkit.procs import free_port
from pipeline import names
from pipeline.errors import TransientError
from schemas.settings import Settings
from workers.dispatch import send
from workers.redaction import reprs

SECRET = "my-bank-pin-is-4071"


def _take(app, queue: str):
    with app.connection_for_read() as conn:
        message = conn.default_channel.basic_get(queue)
        assert message is not None, f"nothing on {queue}"
        return message


def _event(**extra):
    return {"type": "message.added", "event_id": "e-1", "agent_id": "a1", "session_id": "s1",
            "message": {"message_id": "m1", "role": "user", "sender_id": "u1", "content": SECRET}, **extra}


def test_the_default_is_no_result_backend():
    assert Settings().result_backend is None


def test_a_send_ignores_its_result_and_carries_only_ids_and_sizes(celery_app_for):
    app = celery_app_for("memory://")
    assert isinstance(app.backend, DisabledBackend)
    send(names.TASK_INGEST_EVENT, {"event": _event()}, app=app)
    message = _take(app, names.QUEUE_INGEST)
    headers = message.headers
    assert headers["ignore_result"] is True
    assert SECRET not in headers["argsrepr"] + headers["kwargsrepr"]
    assert "'event_id': 'e-1'" in headers["kwargsrepr"] and "'bytes': " in headers["kwargsrepr"]
    assert message.decode()[1]["event"]["message"]["content"] == SECRET  # the worker gets it all


def test_a_message_celery_builds_itself_is_redacted_too(celery_app_for):
    # what a task's retry does: send_task with Celery's own repr of the arguments
    app = celery_app_for("memory://")
    app.send_task(names.TASK_INGEST_BATCH, kwargs={"events": [_event(), _event(event_id="e-2")]})
    headers = _take(app, names.QUEUE_INGEST).headers
    assert SECRET not in headers["kwargsrepr"]
    assert headers["kwargsrepr"].startswith("{'events': '<2 events, ")


def test_a_broker_that_stays_unreachable_is_a_transient_error_naming_it_not_the_arguments(celery_app_for):
    broker = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    app = celery_app_for(broker)
    with pytest.raises(TransientError) as caught:
        send(names.TASK_INGEST_EVENT, {"event": _event()}, app=app, retry_max=0)
    message = str(caught.value)
    assert message.startswith(f"the broker at redis://:**@127.0.0.1:{broker.rsplit(':', 1)[1].split('/')[0]}/0 "
                              "did not accept memory.ingest_event after 0 retries")
    assert SECRET not in message and "s3cret" not in message


@pytest.mark.parametrize(("kwargs", "shown"), [
    ({"run_id": "r-1"}, "{'run_id': 'r-1'}"),
    ({"run_id": "r-1", "index": 2, "scope_key": "user:u-9"}, "{'run_id': 'r-1', 'index': 2, 'scope_key': 'user:u-9'}"),
    ({"agent_id": "a1", "session_id": "s1"}, "{'agent_id': 'a1', 'session_id': 's1'}"),
    ({"event": "not json at all " + SECRET}, "{'event': '<str, 35 bytes>'}"),
    ({"event": ["a", "list"]}, "{'event': '<list, 13 bytes>'}"),
    ({"event": {"type": "session.ended", "agent_id": SECRET * 10}}, "{'event': {'type': 'session.ended', 'bytes': 231}}"),
    ({"events": []}, "{'events': '<0 events, 2 bytes>'}"),
    ({"note": SECRET}, "{'note': '<str, 19 bytes>'}"),
    ({"run_id": {"nested": SECRET}}, "{'run_id': '<dict, 33 bytes>'}"),
])
def test_monitoring_sees_ids_as_they_are_and_everything_else_by_its_size(kwargs, shown):
    argsrepr, kwargsrepr = reprs((), kwargs)
    assert (argsrepr, kwargsrepr) == ("()", shown)
    assert SECRET not in kwargsrepr


def test_positional_arguments_are_shown_by_their_size():
    assert reprs((SECRET,), {}) == ("('<str, 19 bytes>',)", "{}")
