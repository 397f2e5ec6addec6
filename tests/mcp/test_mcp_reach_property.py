"""A property over whatever a model writes into a tool call: bound to one user, the server never
answers with another user's memory and never publishes as anyone else, and every argument the
tool does not declare is refused. The SDK's own client, connected in process, over a demo store."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from mcp import Client

from api.identity import Identity
from api.mcp import build_server, connection_identity
from pipeline.service import MemoryService
from pipeline.store import open_store
from schemas.settings import Settings
from testkit.demo_store import AGENT, MAYA, formed_demo_store
from testkit.publishers import RecordingPublisher

TOM = Identity(AGENT, "user-tom", "mcp:user-tom")
# what only Maya's user memory holds (her email, her Fridays rule, her move)
MAYAS = ("maya.chen@lumenlabs.example", "Fridays", "moved from Lisbon to Porto")
DECLARED = {"search_memory": {"query"}, "get_memory_context": set(), "remember": {"text"}}
NAMES = st.sampled_from([MAYA, "user-priya", "*", "", "user-maya ", "s3-maya-followup", AGENT, "agent-other"])
KEYS = st.sampled_from(["user_id", "user", "userId", "session_id", "session", "agent_id", "sender_id", "as_user",
                        "query ", "Query", "texts"]) | st.text(min_size=1, max_size=8)


@pytest.fixture(scope="module")
def tom_server(tmp_path_factory):
    config = Settings(_env_file=None, store_url=f"sqlite:///{formed_demo_store(tmp_path_factory)}",
                      embedding_provider="hashing")
    store = open_store(config)
    publisher = RecordingPublisher()
    service = MemoryService(AGENT, settings=config, store=store, publisher=publisher)
    server = build_server(lambda agent: service if agent == AGENT else None, connection_identity(TOM))
    yield server, publisher
    store.close()


async def _call(server, name: str, arguments: dict):
    async with Client(server) as client:
        return await client.call_tool(name, arguments)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(DECLARED)),
       query=st.sampled_from(["Maya email address", "Where does Maya live now?", "Fridays deep work", "budget"]),
       extra=st.dictionaries(KEYS, NAMES, max_size=3))
def test_no_argument_reaches_another_users_memory_or_speaks_for_them(tom_server, name, query, extra):
    server, publisher = tom_server
    declared = {"search_memory": {"query": query}, "get_memory_context": {}, "remember": {"text": query}}[name]
    arguments = {**declared, **extra}
    published = len(publisher.events)
    result = asyncio.run(_call(server, name, arguments))
    text = "\n".join(c.text for c in result.content if c.type == "text")
    undeclared = set(arguments) - DECLARED[name]
    if undeclared:
        assert result.is_error and "Extra inputs are not permitted" in text, (arguments, text)
        assert len(publisher.events) == published
    assert not [m for m in MAYAS if m in text], (arguments, text)
    for event in publisher.events[published:]:
        assert event["session_id"] == TOM.session_id and event["agent_id"] == AGENT
        if event["type"] == "message.added":
            assert event["message"]["sender_id"] == TOM.user_id and event["session_users"] == [TOM.user_id]
            assert MAYA not in json.dumps(event)


def test_the_same_calls_as_maya_do_find_her_memory(tmp_path_factory):
    """The property above is not empty: bound to Maya, the same server finds what Tom never sees."""
    config = Settings(_env_file=None, store_url=f"sqlite:///{formed_demo_store(tmp_path_factory)}",
                      embedding_provider="hashing")
    store = open_store(config)
    try:
        service = MemoryService(AGENT, settings=config, store=store)
        server = build_server(lambda agent: service, connection_identity(Identity(AGENT, MAYA, "s3-maya-followup")))
        context = asyncio.run(_call(server, "get_memory_context", {}))
        assert all(m in context.content[0].text for m in MAYAS[:2])
    finally:
        store.close()
