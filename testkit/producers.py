"""Producer processes that publish a list of events as fast as they can, started together: the
load of ``python -m bench.ingest`` and of the multi-producer integration test. Each runs in a
``spawn``-ed process of its own, so it imports and connects as a producer would."""

from __future__ import annotations

import json
import os
import time
from typing import Any

#: events per ``publish_messages`` call of the ``batch`` mode
BATCH = 100
#: the list the ``raw`` mode pushes to (the ceiling of any Redis-brokered path)
RAW_KEY = "bench:raw"


def _app_for(broker_url: str, backend_url: str):
    os.environ["MEMORY_BROKER_URL"] = broker_url
    os.environ["MEMORY_RESULT_BACKEND"] = backend_url
    from schemas.settings import get_settings

    get_settings.cache_clear()
    from workers.app import create_app

    return create_app()


def produce(mode: str, broker_url: str, backend_url: str, items: list[dict[str, Any]], barrier, done) -> None:
    """One producer process: connect, wait for the start signal, publish ``items``."""
    from pipeline import names
    from workers.producer import CeleryPublisher, message_event, publish_message, publish_messages

    if mode == "raw":
        import redis

        client = redis.Redis.from_url(broker_url, socket_timeout=10, socket_connect_timeout=5)
        payloads = [json.dumps(message_event(**fields)) for fields in items]
        client.ping()
        barrier.wait()
        for payload in payloads:
            client.lpush(RAW_KEY, payload)
    else:
        publisher = CeleryPublisher(_app_for(broker_url, backend_url))
        publisher._get_producer().connection.ensure_connection(max_retries=3)
        barrier.wait()
        if mode == "batch":
            for start in range(0, len(items), BATCH):
                publish_messages(items[start:start + BATCH], publisher=publisher)
        elif mode == "single":
            for fields in items:
                publish_message(publisher=publisher, **fields)
        elif mode == "noop":
            for _ in items:
                publisher._send(names.TASK_NOOP, {})
        publisher.close()
    done.put(time.perf_counter())
