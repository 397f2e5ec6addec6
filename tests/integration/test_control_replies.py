"""Control commands (``celery inspect ping``, Flower's inspect pages) read their replies from a
queue of their own without acknowledging them. The reliable pop of ``workers/transport.py``
must leave no unacked record for such a delivery: nobody ever acks it, so it would sit in the
broker's unacked hash until the visibility timeout put the reply back, and a drained broker
would look busy all that time."""

from __future__ import annotations

from kombu import Connection, Exchange, Producer, Queue

from workers import transport


def test_pinging_a_worker_leaves_no_message_unacked(celery_worker_process, celery_app_for, broker_urls, redis_server):
    worker = celery_worker_process(queues=("ingest",))
    app = celery_app_for(*broker_urls)
    broker = redis_server.client(int(broker_urls[0].rsplit("/", 1)[1]))
    host = worker.hostname.split("@")[0]

    replies = app.control.ping(timeout=3.0)

    assert any(name.split("@")[0] == host for reply in replies for name in reply), replies
    assert broker.hlen("unacked") == 0, broker.hgetall("unacked")


def _publish(conn: Connection, queue: Queue, body: dict) -> None:
    Producer(conn.channel()).publish(body, exchange=queue.exchange, routing_key=queue.routing_key,
                                     declare=[queue], serializer="json")


def _one_message(conn: Connection, queue: Queue, *, no_ack: bool):
    got = []
    with conn.Consumer([queue], no_ack=no_ack, callbacks=[lambda body, message: got.append(message)],
                       accept=["json"]):
        conn.drain_events(timeout=5)
    return got[0]


def test_a_delivery_that_needs_an_ack_keeps_its_unacked_record_until_acked(broker_urls, redis_server):
    broker = redis_server.client(int(broker_urls[0].rsplit("/", 1)[1]))
    queue = Queue("one-queue", Exchange("one-queue", type="direct"), routing_key="one-queue")
    with Connection(broker_urls[0], transport=transport.Transport) as conn:
        _publish(conn, queue, {"n": 1})
        message = _one_message(conn, queue, no_ack=False)
        assert broker.hlen("unacked") == 1  # recorded with the pop: a crash here loses nothing
        message.ack()
        assert broker.hlen("unacked") == 0

        _publish(conn, queue, {"n": 2})
        assert _one_message(conn, queue, no_ack=True).payload == {"n": 2}
        assert broker.hlen("unacked") == 0  # no ack will come: nothing to redeliver
