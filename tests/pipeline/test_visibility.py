"""Every read decides what this conversation may see from one read of the store: the agent's
toggles, the session's humans and the user's own switch are read once per call, also when a
context with a query runs a search inside it (on Mongo each read is a round trip)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.search.local import LocalFactSearch
from pipeline.service import MemoryService
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)
from testkit.store_proxy import StoreProxy

EMB = HashingEmbedder(64)
VISIBILITY_READS = ("get_session", "get_agent_settings", "user_memory_off")


class CountingStore(StoreProxy):
    """The real store, counting the reads visibility is decided from."""

    def __init__(self, store):
        super().__init__(store, self._count)
        self.reads: Counter[str] = Counter()

    def _count(self, name, method):
        if name not in VISIBILITY_READS:
            return method

        def counted(*args, **kwargs):
            self.reads[name] += 1
            return method(*args, **kwargs)
        return counted


@pytest.fixture
def counted(store):
    now = T0 + timedelta(days=1)
    for fid, content, user in (("f1", "Mars Festival budget is $50,000", None),
                               ("f2", "Alice's email is alice@example.com", "u1")):
        store.facts.insert_fact(fact(fid, content, user=user, embedding=EMB.embed([content]).vectors[0], model=EMB.model,
                               formed=now - timedelta(hours=1)))
    store.ingest.declare_session_users("s1", "a1", ["u1"])
    wrapper = CountingStore(store)
    service = MemoryService("a1", settings=Settings(_env_file=None), store=wrapper, search=LocalFactSearch(store),
                            embedder=EMB, clock=FrozenClock(now))
    return service, wrapper


@pytest.mark.parametrize("call", [
    lambda s: s.get_memory_context(session_id="s1", user_id="u1"),
    lambda s: s.get_memory_context(session_id="s1", user_id="u1", force_refresh=True),
    lambda s: s.get_memory_context(session_id="s1", user_id="u1", query="alice email"),
    lambda s: s.get_memory_context(session_id="s1", user_id="u1", query="alice email", as_of=s.clock.now()),
    lambda s: s.search_facts("alice email", session_id="s1", user_id="u1"),
    lambda s: s.search_facts(["alice email", "budget"], session_id="s1", user_id="u1", debug=True),
    lambda s: s.tool_definition(session_id="s1", user_id="u1"),
], ids=["context", "context-refreshed", "context-with-query", "context-with-query-as-of", "search",
        "search-debug", "tool-definition"])
def test_each_call_reads_what_decides_visibility_once(counted, call):
    service, store = counted
    answer = call(service)
    assert answer  # the call saw memory: it read the view it was counted for
    assert store.reads == {name: 1 for name in VISIBILITY_READS}


def test_a_context_with_a_query_shows_what_its_one_view_allows(counted):
    service, store = counted
    xml = service.get_memory_context(session_id="s1", user_id="u1", query="alice email")
    assert "<RelevantFacts>" in xml and "alice@example.com" in xml
    store.ingest.declare_session_users("s1", "a1", ["u2"])  # now a group chat: no user scope, in both parts
    xml = service.get_memory_context(session_id="s1", user_id="u1", query="alice email")
    assert "alice@example.com" not in xml and "Mars Festival" in xml
