"""A user's own MCP session has one human, that user, at the in-process door too: a runtime
calling ``MemoryService`` directly cannot make anyone else a human of it (design §12 "Sessions
belong to their people")."""

from __future__ import annotations

import pytest

from pipeline.errors import InvalidInput
from pipeline.service import MemoryService
from schemas.settings import Settings
from testkit.publishers import RecordingPublisher
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

OWN = "mcp:a1:u1"


@pytest.fixture
def service(store):
    return MemoryService("a1", settings=Settings(_env_file=None), store=store, publisher=RecordingPublisher())


@pytest.mark.parametrize(("session_users", "sender"), [(["u2"], "u2"), ([], "u2"), (["u1", "u2"], "u1")])
def test_no_publish_puts_a_stranger_into_someones_own_session(service, session_users, sender):
    with pytest.raises(InvalidInput) as refused:
        service.maybe_form_memories([{"message_id": "m1", "role": "user", "sender_id": sender, "content": "hi"}],
                                    session_id=OWN, session_users=session_users)
    assert refused.value.field == "session_users" and "'u2' cannot be one of its humans" in refused.value.reason
    assert service.publisher.events == []


def test_no_session_start_declares_a_stranger_in_someones_own_session(service, store):
    with pytest.raises(InvalidInput) as refused:
        service.on_session_start(session_id=OWN, user_ids=["u1", "u2"])
    assert refused.value.field == "user_ids" and store.ingest.get_session(OWN) is None
    service.on_session_start(session_id=OWN, user_ids=["u1"])
    assert store.ingest.get_session(OWN).users == ["u1"]


def test_the_owner_speaks_in_it_and_other_sessions_are_the_platforms_to_fill(service):
    from pipeline.own_session import default_session, strangers

    published = service.maybe_form_memories(
        [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hi"}], session_id=OWN)
    assert published == 1 and default_session("a1", "u1") == OWN
    assert strangers("a1", "s-group", ["u1", "u2"]) == [] and strangers("a2", OWN, ["u1"]) == ["u1"]
