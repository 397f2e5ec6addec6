"""The Redis broker transport, closed against two ways a broker crash loses or stops work.

kombu's Redis transport takes a message with BRPOP and records it as unacked in a second
round trip. When Redis dies between the two (seen in the broker-outage scenario of
``bench.reliability``: the append-only file ends on the RPOP), the stock transport drops a
message the broker no longer holds: an event the producer was told is accepted is lost.
Here the consumer waits for the broker to come back and records the delivery then, so the
message is redelivered by the visibility timeout like any other if the worker later drops it.

Closing a channel after the connection is gone, or acking a message on such a channel, makes
the stock transport raise ``AttributeError``, and the worker exits ("Unrecoverable error").
Those messages are still in Redis's unacked hash, so the visibility-timeout sweep restores
them later: the restore at close is skipped and the ack reported as a connection error.

Redis may also execute and persist a pop, then stop (SIGTERM or SIGKILL) before it sends the
reply: the message is then neither queued nor unacked, and no client can see it (1 event in
about 300 per restart in the broker-outage scenario). A channel that consumes one queue, as
every worker of docker-compose.yml does, therefore never pops blindly: it waits with
``BLMOVE q q RIGHT RIGHT`` (which leaves the list as it was) and then takes the message and
records it as unacked in one Lua script, so a persisted pop always has its unacked record and
the visibility timeout redelivers it. A channel on several queues keeps kombu's BRPOP, and so
does a consumer that never acks (a control command reading its replies): an unacked record of
its delivery would never be dropped.

A message a worker cannot run (a hand-built one that is not JSON, lacks the envelope's delivery
tag or the task header, or has an undecodable body) is set aside by both paths
(``workers.envelope``): recorded among the rejected events, then dropped from Redis. The atomic
pop used to fail on it inside Redis and stop the worker, leaving it at the head of the queue.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import time

import redis

from kombu.transport import TRANSPORT_ALIASES, _transport_cache
from kombu.transport import redis as _redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads
from queue import Empty

from workers import envelope

log = logging.getLogger("memory.broker")


class QoS(_redis.QoS):
    #: how long a popped message waits for the broker to come back before it is delivered
    #: without its unacked record
    record_patience_s = 60.0

    def append(self, message, delivery_tag):
        if delivery_tag == getattr(self.channel, "_recorded_tag", None):
            # the reliable pop already recorded it as unacked, in the same atomic step
            return virtual.QoS.append(self, message, delivery_tag)
        deadline = time.monotonic() + self.record_patience_s
        delay = 0.05
        while True:
            try:
                return self._record(message, delivery_tag)
            except self.channel.connection_errors as exc:
                if time.monotonic() >= deadline:
                    log.error("broker gone for %.0f s while recording a delivery as unacked (%s); delivering it without that record",
                              self.record_patience_s, exc)
                    return virtual.QoS.append(self, message, delivery_tag)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _record(self, message, delivery_tag):
        """kombu's unacked record (index score and ``[payload, exchange, routing key]``), written
        by one script instead of a MULTI/EXEC pipeline: the same atomic pair of writes for about
        half the client CPU, which the worker's one consumer thread spends on every delivery."""
        if self.channel.global_keyprefix:  # the prefixing client knows pipelines, not scripts
            return super().append(message, delivery_tag)
        delivery = message.delivery_info
        with self.channel.conn_or_acquire() as client:
            _script(client, _RECORD, 2, self.unacked_index_key, self.unacked_key,
                    time.time(), delivery_tag, dumps([message._raw, delivery["exchange"], delivery["routing_key"]]))
        return virtual.QoS.append(self, message, delivery_tag)

    def _forget(self, delivery_tag):
        """kombu's ack (drop the index entry and the record), as one script, like ``_record``."""
        if self.channel.global_keyprefix:
            return super().ack(delivery_tag)
        with self.channel.conn_or_acquire() as client:
            _script(client, _FORGET, 2, self.unacked_index_key, self.unacked_key, delivery_tag)
        return virtual.QoS.ack(self, delivery_tag)

    def ack(self, delivery_tag):
        try:
            self._forget(delivery_tag)
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


_RECORD = """
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
"""

_FORGET = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""

_SHA = {}


def _script(client, source: str, numkeys: int, *keys_and_args):
    """Run a Lua script by its digest (loading it on the first use on a server)."""
    sha = _SHA.get(source)
    if sha is None:
        sha = _SHA[source] = hashlib.sha1(source.encode()).hexdigest()
    try:
        return client.evalsha(sha, numkeys, *keys_and_args)
    except redis.exceptions.NoScriptError:
        return client.eval(source, numkeys, *keys_and_args)


# Pop the first message of the queue's keys (in priority order) and record it as unacked, in
# one atomic step: a pop Redis persists is never one that nobody holds. The raw payload is
# stored as sent (string concatenation), in kombu's unacked format [payload, exchange, key].
# Text that is not a kombu envelope cannot be recorded as unacked (kombu's restore decodes it):
# it moves whole to the queue key's list of undeliverable messages and is returned with a third
# element. Every key the script touches is passed in KEYS (Redis's rule for scripts: "all the
# keys accessed by the script must be explicitly passed", https://redis.io/docs/latest/develop/
# interact/programmability/eval-intro/ "Script parameterization"): the unacked index and hash,
# then ARGV[2] queue keys, then their undeliverable lists in the same order.
_POP_AND_RECORD = """
local n = tonumber(ARGV[2])
for i = 3, 2 + n do
  local raw = redis.call('LINDEX', KEYS[i], -1)
  if raw then
    -- decoded and checked before any write: a script that fails has changed nothing
    local ok, msg = pcall(cjson.decode, raw)
    local props = ok and type(msg) == 'table' and msg['properties']
    local info = type(props) == 'table' and props['delivery_info']
    local tag = type(props) == 'table' and props['delivery_tag']
    if type(info) ~= 'table' or type(tag) ~= 'string' then
      redis.call('RPOP', KEYS[i])
      redis.call('LPUSH', KEYS[i + n], raw)
      return {KEYS[i], raw, 'not an envelope'}
    end
    local exchange, routing_key = info['exchange'], info['routing_key']
    if type(exchange) ~= 'string' then exchange = '' end
    if type(routing_key) ~= 'string' then routing_key = '' end
    redis.call('RPOP', KEYS[i])
    redis.call('ZADD', KEYS[1], ARGV[1], tag)
    redis.call('HSET', KEYS[2], tag, '[' .. raw .. ', ' .. cjson.encode(exchange) .. ', ' .. cjson.encode(routing_key) .. ']')
    return {KEYS[i], raw}
  end
end
return nil
"""

_NOT_AN_ENVELOPE = "not a kombu envelope (a JSON object with properties.delivery_tag and properties.delivery_info)"


class Channel(_redis.Channel):
    QoS = QoS

    def __init__(self, *args, **kwargs):
        #: queues consumed without acks (a control command's reply queue): the reliable pop
        #: would give their deliveries unacked records that nothing ever drops, and the
        #: visibility timeout would deliver them again
        self._no_ack_queues: set[str] = set()
        super().__init__(*args, **kwargs)

    def basic_consume(self, queue, no_ack, *args, **kwargs):
        (self._no_ack_queues.add if no_ack else self._no_ack_queues.discard)(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    # --- reliable pop, for a channel that consumes one queue (every worker of the compose file)
    def _reliable_pop(self) -> bool:
        queues = self.active_queues
        return len(queues) == 1 and queues[0] not in self._no_ack_queues and not self.global_keyprefix

    def _brpop_start(self, timeout=None):
        if not self._reliable_pop():
            return super()._brpop_start(timeout)
        if timeout is None:
            timeout = self.brpop_timeout
        queue = self._queue_cycle.consume(1)[0]
        key = self._q_for_pri(queue, self.priority_steps[0])
        self._reliable_queue = queue
        self._in_poll = self.client.connection
        self._brpop_sent_at = time.monotonic()
        # waits until the queue holds a message without taking it (the element is put back
        # where it was), then the message is taken atomically with its unacked record
        self.client.connection.send_command("BLMOVE", key, key, "RIGHT", "RIGHT", timeout or 0)

    def _brpop_read(self, **options):
        if getattr(self, "_reliable_queue", None) is None:  # the command in flight is a BRPOP
            return self._plain_brpop_read(**options)
        queue, self._reliable_queue = self._reliable_queue, None
        try:
            try:
                self.client.parse_response(self.client.connection, "BLMOVE", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            keys = [self._q_for_pri(queue, pri) for pri in self.priority_steps]
            aside = [key + envelope.UNDELIVERABLE_SUFFIX for key in keys]
            with self.conn_or_acquire() as client:
                got = client.eval(_POP_AND_RECORD, 2 + 2 * len(keys), self.unacked_index_key, self.unacked_key,
                                  *keys, *aside, time.time(), len(keys))
            if not got:
                raise Empty()
            key, item = bytes_to_str(got[0]), bytes_to_str(got[1])
            dest = key.rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            if len(got) > 2:  # moved aside by the script
                if envelope.set_aside(dest, item, _NOT_AN_ENVELOPE):
                    with self.conn_or_acquire() as client:
                        client.lrem(key + envelope.UNDELIVERABLE_SUFFIX, 1, item)
                raise Empty()
            payload = loads(item)
            problem = envelope.message_problem(payload, dest)
            if problem is not None:
                # recorded as unacked by the script: dropped once recorded as rejected, else
                # handed back by the visibility timeout
                if envelope.set_aside(dest, item, problem):
                    self.qos._forget(payload["properties"]["delivery_tag"])
                raise Empty()
            self._recorded_tag = payload["properties"]["delivery_tag"]
            try:
                self.connection._deliver(payload, dest)
            finally:
                self._recorded_tag = None
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _plain_brpop_read(self, **options):
        """kombu's BRPOP read (a channel on several queues), except that a popped message that
        cannot be delivered is set aside (``workers.envelope``) instead of lost."""
        try:
            try:
                got = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not got:
                raise Empty()
            key, item = bytes_to_str(got[0]), bytes_to_str(got[1])
            dest = key.rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            try:
                payload = loads(item)
            except ValueError:
                problem = _NOT_AN_ENVELOPE
            else:
                problem = envelope.message_problem(payload, dest)
            if problem is None:
                self.connection._deliver(payload, dest)
                return True
            if not envelope.set_aside(dest, item, problem):
                with self.conn_or_acquire() as client:  # kept in Redis until it can be recorded
                    client.lpush(key + envelope.UNDELIVERABLE_SUFFIX, item)
            raise Empty()
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

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
    """``redis://`` and ``rediss://`` (TLS: kombu's connection parameters pick redis-py's SSL
    connection from the URL's ``ssl_*`` query or ``broker_use_ssl``; the pop is the same)."""

    Channel = Channel


class SentinelChannel(Channel, _redis.SentinelChannel):
    """The reliable pop on the master a Redis Sentinel names: kombu's sentinel channel builds
    the pool (its connections ask the sentinels for the master on every connect, so a
    failover is followed), this module's channel pops from it."""


class SentinelTransport(Transport):
    """``sentinel://host:26379;sentinel://host2:26379/0`` with the ``master_name`` transport
    option (``MEMORY_BROKER_SENTINEL_MASTER``)."""

    default_port = _redis.SentinelTransport.default_port
    Channel = SentinelChannel


#: this module's transports, as kombu names a transport class, by the URL scheme they serve:
#: every scheme kombu maps to its Redis transports (kombu.transport.TRANSPORT_ALIASES)
TRANSPORTS = {
    "redis": "workers.transport:Transport",
    "rediss": "workers.transport:Transport",
    "sentinel": "workers.transport:SentinelTransport",
}
#: kept for callers that name the plain one
REDIS_TRANSPORT = TRANSPORTS["redis"]


def register() -> None:
    """Make ``redis://``, ``rediss://`` and ``sentinel://`` URLs use these transports in this
    process.

    kombu resolves a URL's scheme through its alias table (``kombu.transport.TRANSPORT_ALIASES``).
    Registered there, the broker URL keeps its scheme everywhere it is shown or parsed: Flower
    maps the scheme to its Redis broker client (Broker tab, ``/api/queues/length``), which a
    ``broker_transport`` class path (the connection's URI then reads
    ``workers.transport:Transport://...``) made impossible."""
    ours = {"workers.transport:Transport": Transport, "workers.transport:SentinelTransport": SentinelTransport}
    for scheme, path in TRANSPORTS.items():
        TRANSPORT_ALIASES[scheme] = path
        # kombu caches a resolved alias; drop a stock class resolved before this call
        if _transport_cache.get(scheme) not in (None, ours[path]):
            del _transport_cache[scheme]


class BrokerRefused(ValueError):
    """A broker URL the workers cannot serve with the reliable pop; the message is one line
    naming the setting to change."""


def broker_options(url: str, *, sentinel_master: str | None) -> dict:
    """Celery's ``broker_use_ssl`` and transport options for ``url`` (``MEMORY_BROKER_URL``),
    or ``BrokerRefused``.

    - ``rediss://`` verifies the server's certificate against the system's authorities (and
      its host name) unless the URL's query says otherwise (``ssl_cert_reqs``, ``ssl_ca_certs``,
      ``ssl_certfile``, ``ssl_keyfile``, ``ssl_check_hostname``): kombu alone would connect
      without checking it, with a warning, where redis-py and Celery's result backend check.
    - ``sentinel://`` needs the name of the master to ask the sentinels for.
    - Any other Redis-like scheme (``redis+socket://``, ``valkey://``) would reach a transport
      without the reliable pop, or none: refused.
    """
    scheme = url.partition("://")[0].lower()
    options: dict = {}
    if scheme == "rediss" and "ssl_cert_reqs=" not in url.partition("?")[2]:
        options["broker_use_ssl"] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    if scheme == "sentinel":
        if not sentinel_master:
            raise BrokerRefused(
                "MEMORY_BROKER_SENTINEL_MASTER is not set: a sentinel:// MEMORY_BROKER_URL needs the name "
                "of the master the sentinels watch (e.g. mymaster)")
        options["transport_options"] = {"master_name": sentinel_master}
    elif sentinel_master:
        raise BrokerRefused(
            f"MEMORY_BROKER_SENTINEL_MASTER is set, but MEMORY_BROKER_URL is {scheme}://, not sentinel://")
    if scheme not in TRANSPORTS and ("redis" in scheme or "valkey" in scheme or "sentinel" in scheme):
        raise BrokerRefused(
            f"MEMORY_BROKER_URL: {scheme}:// has no reliable queue pop here; use redis://, rediss:// "
            "(TLS) or sentinel://")
    return options
