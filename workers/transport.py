"""The Redis broker transport, closed against two ways a broker crash loses or stops work.

kombu's Redis transport takes a message with BRPOP and records it as unacked in a second
round trip. When Redis dies between the two (seen in the broker-outage scenario of
``ops.bench.reliability``: the append-only file ends on the RPOP), the stock transport drops a
message the broker no longer holds: an event the producer was told is accepted is lost.
Here the consumer waits for the broker to come back and records the delivery then, so the
message is redelivered by the visibility timeout like any other if the worker later drops it.

Closing a channel after the connection is gone, or acking a message on such a channel, makes
the stock transport raise ``AttributeError``, and the worker exits ("Unrecoverable error").
Those messages are still in Redis's unacked hash, so the visibility-timeout sweep restores
them later: the restore at close is skipped and the ack reported as a connection error.

What no client can close: Redis may execute and persist a pop, then stop (SIGTERM or SIGKILL)
before it sends the reply. The message is then neither queued nor unacked. Only a pop that
moves the message atomically into a processing list on the server would survive that.
"""

from __future__ import annotations

import logging
import time

import redis

from kombu.transport import redis as _redis
from kombu.transport import virtual

log = logging.getLogger("memory.broker")


class QoS(_redis.QoS):
    #: how long a popped message waits for the broker to come back before it is delivered
    #: without its unacked record
    record_patience_s = 60.0

    def append(self, message, delivery_tag):
        deadline = time.monotonic() + self.record_patience_s
        delay = 0.05
        while True:
            try:
                return super().append(message, delivery_tag)
            except self.channel.connection_errors as exc:
                if time.monotonic() >= deadline:
                    log.error("broker gone for %.0f s while recording a delivery as unacked (%s); delivering it without that record",
                              self.record_patience_s, exc)
                    return virtual.QoS.append(self, message, delivery_tag)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def ack(self, delivery_tag):
        try:
            super().ack(delivery_tag)
        except AttributeError as exc:
            # acked on a channel closed by a broker loss: report it as the connection error it
            # is (kombu logs "Couldn't ack" and goes on); the visibility timeout redelivers
            raise redis.exceptions.ConnectionError(f"channel closed before the ack: {exc}") from exc

    def restore_unacked(self, client=None):
        try:
            super().restore_unacked(client)
        except (AttributeError, *self.channel.connection_errors) as exc:
            # the unacked hash still holds them: the visibility-timeout sweep restores them
            log.warning("broker connection gone; unacked messages are left to the visibility timeout (%s)", exc)
            self._delivered.clear()


class Channel(_redis.Channel):
    QoS = QoS

    def _create_client(self, asynchronous=False):
        """One client per connection pool, not one per call: the stock channel builds a new
        ``redis.Redis`` (with its table of ~170 response callbacks) for every publish, ack and
        unacked record, about five per task and the largest single CPU cost of a busy worker.
        A client is thread-safe (each command takes a pooled connection)."""
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        cached = self.__dict__.get("_shared_client")
        if cached is None or cached[0] is not pool:
            cached = (pool, super()._create_client())
            self.__dict__["_shared_client"] = cached
        return cached[1]


class Transport(_redis.Transport):
    Channel = Channel


#: the value of Celery's ``broker_transport`` for a ``redis://`` broker URL
REDIS_TRANSPORT = "workers.transport:Transport"
