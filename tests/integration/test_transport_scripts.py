"""The transport's Lua scripts declare every key they touch (Redis's scripting rule: "all the
keys accessed by the script must be explicitly passed", which Redis Cluster relies on to route
a script), watched on a real ``redis-server`` through ``MONITOR``: each command a script runs
names only keys its ``EVAL``/``EVALSHA`` passed. Producers still write to the plain queue
names (``LPUSH ingest``)."""

from __future__ import annotations

import re
import threading

import pytest
from kombu import Connection, Exchange, Queue

from schemas.settings import Settings
from workers import transport
from workers.deps import Deps, set_deps

#: one quoted argument of a MONITOR line (``sdscatrepr`` quoting)
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: the commands the scripts run, each with its one key first
_ONE_KEY_FIRST = {"LINDEX", "RPOP", "LPUSH", "ZADD", "HSET", "ZREM", "HDEL"}
_END = "end-of-test"


class Monitor(threading.Thread):
    """Every command the server runs, as (ran from a script?, [args]) in order."""

    def __init__(self, server) -> None:
        super().__init__(daemon=True)
        self.conn = server.client(0).connection_pool.get_connection()
        self.conn.send_command("MONITOR")
        assert self.conn.read_response() in (b"OK", "OK")
        self.seen: list[tuple[bool, list[str]]] = []
        self.start()

    def run(self) -> None:
        while True:
            line = self.conn.read_response()
            line = line.decode() if isinstance(line, bytes) else line
            head, _, _ = line.partition('"')
            args = _ARG.findall(line)
            if args[:2] == ["ECHO", _END]:
                return
            self.seen.append(("lua]" in head, args))


@pytest.fixture
def store_deps(tmp_path):
    """A SQLite store for the messages the transport sets aside (``workers.envelope``)."""
    deps = Deps(Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}"))
    set_deps(deps)
    yield deps
    set_deps(None)
    deps.store.close()


def _drain(conn: Connection, queues: list[Queue], expected: int) -> list:
    got = []
    with conn.Consumer(queues, callbacks=[lambda body, message: (got.append(body), message.ack())], accept=["json"]):
        for _ in range(20):
            if len(got) >= expected:
                break
            try:
                conn.drain_events(timeout=1)
            except TimeoutError:
                continue
    return got


def test_every_key_a_transport_script_touches_is_declared(redis_server, broker_urls, store_deps):
    db = int(broker_urls[0].rsplit("/", 1)[1])
    broker = redis_server.client(db)
    one = Queue("one-queue", Exchange("one-queue", type="direct"), routing_key="one-queue")
    other = Queue("other-queue", Exchange("other-queue", type="direct"), routing_key="other-queue")
    monitor = Monitor(redis_server)
    with Connection(broker_urls[0], transport=transport.Transport) as conn:
        broker.lpush("one-queue", "not-an-envelope")  # what a foreign producer may write with LPUSH
        producer = conn.Producer()
        for queue in (one, other):
            producer.publish({"q": queue.name}, exchange=queue.exchange, routing_key=queue.routing_key,
                             declare=[queue], serializer="json")
        # one queue: the atomic pop (and the set-aside path); two queues: BRPOP, then the record
        assert _drain(conn, [one], 1) == [{"q": "one-queue"}]
        assert _drain(conn, [one, other], 1) == [{"q": "other-queue"}]
    broker.echo(_END)
    monitor.join(timeout=10)

    scripts = ran = 0
    declared: set[str] = set()
    for from_script, args in monitor.seen:
        if args and args[0].upper() in ("EVAL", "EVALSHA") and not from_script:
            scripts += 1
            declared = set(args[3:3 + int(args[2])])
        elif from_script:
            ran += 1
            assert args[0].upper() in _ONE_KEY_FIRST, args
            assert args[1] in declared, f"a script ran {args[0]} on {args[1]!r}, not among its keys {sorted(declared)}"
    assert scripts >= 4 and ran >= 8  # the set-aside pop, the pop, the record and the acks ran
    assert broker.llen("one-queue:undeliverable") == 0  # set aside in the store, then dropped
    assert len(store_deps.store.ingest.list_rejections(limit=10)) == 1
