"""The Celery app's broker connection: our Redis transport under the ``redis://`` scheme."""

from __future__ import annotations

from kombu import Connection

from workers import transport
from workers.app import app


def test_a_redis_url_uses_the_reliable_transport_and_keeps_its_scheme():
    with Connection("redis://:pw@broker.example:6379/0") as conn:
        assert conn.get_transport_cls() is transport.Transport
        assert conn.as_uri(include_password=True) == "redis://:pw@broker.example:6379/0"
    with app.connection_for_write() as conn:
        assert conn.transport.driver_type == "redis"
        assert conn.as_uri().startswith("redis://")


def test_registering_twice_changes_nothing():
    transport.register()
    with Connection("redis://localhost:6379/0") as conn:
        assert conn.get_transport_cls() is transport.Transport
