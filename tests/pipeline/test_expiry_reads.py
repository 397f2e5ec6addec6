"""Reads leave an expired fact out at once, before beat stamps it (design §13 "Expiry"): the
``<Facts>`` block (also when served from the session's cache), ``search_facts`` (also from a
search segment cached before the expiry), and ``as_of`` a time before the expiry still shows it.
The property: no read at a time t returns a fact whose ``expires_at`` is at or before t, and
every other fact still shows, whether beat's stamp ran before the read or not."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from pipeline import expiry
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.service import MemoryService
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

EMB = HashingEmbedder(64)
NOW = T0 + timedelta(days=1)


def _service(store, clock):
    return MemoryService("a1", settings=Settings(_env_file=None), store=store, embedder=EMB, clock=clock)


def _fact(store, fid, content, *, user="u1", expires_in_h=None):
    f = fact(fid, content, user=user, embedding=EMB.embed([content]).vectors[0], model=EMB.model,
             formed=NOW - timedelta(hours=1))
    if expires_in_h is not None:
        f = f.model_copy(update={"expires_at": NOW + timedelta(hours=expires_in_h)})
    store.facts.insert_fact(f)
    store.leases.bump_scope_versions("a1", [f.scope_key])
    return f


def _ids(service, query):
    return [hit["id"] for hit in service.search_facts(query, session_id="s1", user_id="u1")]


def test_an_expired_fact_leaves_the_context_and_search_without_the_beat_task(store):
    clock = FrozenClock(NOW)
    service = _service(store, clock)
    _fact(store, "f1", "The caterer needs the guest count by Friday", expires_in_h=2)
    _fact(store, "f2", "Alice likes the caterer from Porto")
    assert "guest count" in service.get_memory_context(session_id="s1", user_id="u1")   # cached now
    hits = {h["id"]: h for h in service.search_facts("caterer Porto guest count", session_id="s1", user_id="u1")}
    assert sorted(hits) == ["f1", "f2"]   # the search segments are cached now
    assert hits["f1"]["expires_at"] == (NOW + timedelta(hours=2)).isoformat() and "expires_at" not in hits["f2"]
    clock.advance(hours=2)   # the expiry passes; nothing stamps it, no version stamp moves
    xml = service.get_memory_context(session_id="s1", user_id="u1")
    assert "guest count" not in xml and "caterer from Porto" in xml
    assert _ids(service, "caterer Porto guest count") == ["f2"]
    # as of a time before the expiry it still shows, and its validity ends at the expiry
    before = NOW + timedelta(hours=1)
    assert "guest count" in service.get_memory_context(session_id="s1", user_id="u1", as_of=before)
    [hit] = [h for h in service.search_facts("caterer guest count", session_id="s1", user_id="u1", as_of=before)
             if h["id"] == "f1"]
    assert hit["valid_to"] == (NOW + timedelta(hours=2)).isoformat()
    assert "guest count" not in service.get_memory_context(session_id="s1", user_id="u1",
                                                           as_of=NOW + timedelta(hours=2))


def test_the_facts_window_keeps_its_size_when_expired_facts_are_among_the_newest(store):
    clock = FrozenClock(NOW)
    service = _service(store, clock)
    settings = Settings(_env_file=None)
    for i in range(settings.facts_fifo_limit):
        _fact(store, f"old{i}", f"standing fact number {i}")
    for i in range(3):  # the newest changes, expired by the read
        f = fact(f"x{i}", f"deadline {i} has passed", user="u1", formed=NOW - timedelta(minutes=1),
                 ).model_copy(update={"expires_at": NOW})
        store.facts.insert_fact(f)
    xml = service.get_memory_context(session_id="s1", user_id="u1")
    assert "deadline" not in xml
    assert xml.count("standing fact number") == settings.facts_fifo_limit


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expiries=st.lists(st.one_of(st.none(), st.integers(-180, 180)), min_size=1, max_size=6),
       read_at=st.integers(-200, 200), stamped_at=st.one_of(st.none(), st.integers(-200, 200)))
def test_no_read_at_a_time_returns_a_fact_expired_by_then(tmp_path_factory, expiries, read_at, stamped_at):
    store = SQLiteStore(str(tmp_path_factory.mktemp("expiry") / "memory.db"))
    store.create_indexes()
    try:
        when = NOW + timedelta(minutes=read_at)
        service = _service(store, FrozenClock(when))
        for i, minutes in enumerate(expiries):
            f = fact(f"f{i}", f"the plan number {i} for the trip", user="u1", formed=NOW - timedelta(hours=5),
                     embedding=EMB.embed([f"the plan number {i} for the trip"]).vectors[0], model=EMB.model)
            store.facts.insert_fact(f.model_copy(update={
                "expires_at": None if minutes is None else NOW + timedelta(minutes=minutes)}))
        if stamped_at is not None and stamped_at <= read_at:  # beat ran before the read, or not at all
            expiry.stamp_expired(store, NOW + timedelta(minutes=stamped_at), batch=2)
        expired = {f"f{i}" for i, m in enumerate(expiries) if m is not None and NOW + timedelta(minutes=m) <= when}
        shown = {f"plan number {i} " for i in range(len(expiries)) if f"f{i}" not in expired}
        for as_of in (None, when):
            xml = service.get_memory_context(session_id="s1", user_id="u1", as_of=as_of)
            found = {h["id"] for h in service.search_facts("plan trip", session_id="s1", user_id="u1", as_of=as_of)}
            assert not found & expired
            assert all(f"plan number {i} " not in xml for i in range(len(expiries)) if f"f{i}" in expired)
            assert all(line in xml for line in shown)
    finally:
        store.close()
