"""What a worker accepts from its queues, and what becomes of a message it cannot take.

A queue is a Redis list (key = the queue's name, e.g. ``ingest``) of kombu envelopes: JSON
objects holding a Celery protocol 2 message (docs/producers.md "Producers in any language"). Producers
in other languages write them by hand, so a worker meets broken ones: text that is not JSON,
an envelope without ``properties.delivery_tag``, a message without ``headers.task``, a body
that does not decode to ``[args, kwargs, embed]``.

Left to kombu and Celery, such a message is lost or stops the worker: the stock Redis transport
pops it and then fails to decode it, Celery acks a body it cannot decode and logs it away, and
the atomic pop of ``workers/transport.py`` failed on it in Redis and took the worker down
("Unrecoverable error"), leaving it at the head of the queue for the next worker to die on.
Instead the transport sets it aside (``set_aside``): it is recorded among the rejected events
(``memoryctl rejected``; field ``<message>``, the reason, the raw text) and only then removed
from Redis. While the store cannot take the record, the message waits in Redis: a non-envelope
in the list ``<queue>:undeliverable``, an envelope in the unacked record, which the visibility
timeout hands back.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any

from pipeline import names

log = logging.getLogger("memory.broker")

#: the Redis list where text that is not an envelope waits until it is recorded
UNDELIVERABLE_SUFFIX = ":undeliverable"
#: the field of the rejected-event record of such a message
FIELD = "<message>"


def message_problem(envelope: Any, queue: str) -> str | None:
    """Why a decoded envelope taken from ``queue`` cannot be delivered, or None. On a task
    queue (``names.QUEUES``) it must hold a Celery protocol 2 message a worker can run; other
    lists (the replies to ``celery inspect`` and ``ping``) need only kombu's envelope. Never
    quotes the message (the reason goes to logs)."""
    if not isinstance(envelope, dict):
        return f"the envelope is a JSON {type(envelope).__name__}, not an object"
    headers, props = envelope.get("headers"), envelope.get("properties")
    if not isinstance(props, dict) or not isinstance(props.get("delivery_tag"), str) \
            or not isinstance(props.get("delivery_info"), dict):
        return "properties.delivery_tag (a string) and properties.delivery_info (an object) are required"
    if queue not in names.QUEUES:
        return None
    if not isinstance(headers, dict) or not isinstance(headers.get("task"), str) or not isinstance(headers.get("id"), str):
        return "headers.task and headers.id (strings) are required (Celery message protocol 2)"
    if envelope.get("content-type") != "application/json":
        return f"content-type must be application/json, not {str(envelope.get('content-type'))[:40]!r}"
    body = envelope.get("body")
    if not isinstance(body, str):
        return "body must be a string"
    encoding = props.get("body_encoding")
    try:
        if encoding == "base64":
            body = base64.b64decode(body, validate=True).decode("utf-8")
        elif encoding is not None:
            return f"properties.body_encoding must be base64 or absent, not {str(encoding)[:20]!r}"
        decoded = json.loads(body)
    except (binascii.Error, UnicodeDecodeError) as exc:
        return f"the body is not base64 of UTF-8 text ({type(exc).__name__})"
    except ValueError as exc:
        return f"the body is not JSON ({exc})"
    if not (isinstance(decoded, list) and len(decoded) == 3 and isinstance(decoded[0], list)
            and isinstance(decoded[1], dict) and isinstance(decoded[2], (dict, type(None)))):
        return "the body must be the JSON array [args, kwargs, embed]"
    return None


def set_aside(queue: str, raw: str, reason: str) -> bool:
    """Record an undeliverable message among the rejected events; True once it is recorded
    (the caller then removes it from Redis), False when the store cannot take it now."""
    from pipeline.ingest import record_rejection
    from schemas.events import FieldError, Rejection
    from workers.deps import get_deps

    deps = get_deps()
    rejection = Rejection(errors=[FieldError(field=FIELD, reason=f"undeliverable message on queue {queue}: {reason}")])
    try:
        record_rejection(raw, rejection, deps.store.ingest, deps.clock.now())
    except Exception as exc:  # noqa: BLE001 - any store failure: the message stays in Redis, said so
        log.error("undeliverable message on queue %s (%s) could not be recorded, it waits in Redis: %s: %s",
                  queue, reason, type(exc).__name__, exc)
        return False
    log.warning("undeliverable message on queue %s recorded among the rejected events: %s", queue, reason)
    return True
