import asyncio
from datetime import datetime, timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.errors import InvalidInput
from pipeline.service import MemoryService
from schemas.documents import AgentSettings, CachedContext, ConsolidatedBlob
from schemas.events import SessionEnded, parse_event
from schemas.settings import Settings
from testkit.documents import T0, fact, message, reflection
from testkit.publishers import RecordingPublisher
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

EMB = HashingEmbedder(64)


@pytest.fixture
def clock():
    return FrozenClock(T0 + timedelta(days=1))


def _service(store, clock, **settings):
    publisher = RecordingPublisher()
    started = []
    service = MemoryService(
        "a1", settings=Settings(_env_file=None, **settings), store=store, embedder=EMB,
        publisher=publisher, clock=clock, run_starter=started.append,
    )
    return service, publisher, started


def _fact(store, fid, content, *, user=None, agent="a1", hours_ago=0.0, clock_now=T0 + timedelta(days=1)):
    f = fact(fid, content, agent=agent, user=user, embedding=EMB.embed([content]).vectors[0], model=EMB.model,
             formed=clock_now - timedelta(hours=hours_ago))
    store.facts.insert_fact(f)
    store.leases.bump_scope_versions(agent, [f.scope_key])
    return f


def _blob(store, key, text, scope, user=None, session=None, agent="a1"):
    store.blobs.save_blob(ConsolidatedBlob(agent_id=agent, scope=scope, scope_key=key, user_id=user, session_id=session,
                                     consolidated_content=text, word_limit=300, version=1), expected_version=0)
    store.leases.bump_scope_versions(agent, [key])


@pytest.fixture
def memory(store):
    _blob(store, "agent", "VERSION: 1\nMars project is on track.", "agent")
    _blob(store, "user:u1", "Alice prefers short answers.", "user", user="u1")
    store.reflections.insert_reflections([
        reflection("r1", "Alice wants Spanish <replies>", scope="user", user="u1"),
        reflection("r2", "Planning the venue today", scope="session", session="s1"),
        reflection("r3", "Bob hates mornings", scope="user", user="u2"),
    ])
    store.leases.bump_scope_versions("a1", ["user:u1", "session:s1", "user:u2"])
    _fact(store, "f1", "Mars Festival budget is $50,000", hours_ago=72)
    _fact(store, "f2", "Alice's email is alice@example.com", user="u1", hours_ago=1)
    _fact(store, "f3", "Bob's phone is 555-0100", user="u2", hours_ago=2)
    _fact(store, "x1", "Other agent secret budget", agent="a2", hours_ago=1)
    return store


def test_context_shows_each_scope_and_the_newest_visible_facts(memory, clock):
    service, _, _ = _service(memory, clock)
    xml = service.get_memory_context(session_id="s1", user_id="u1")
    assert xml.startswith("<MemoryContext>") and xml.endswith("</MemoryContext>")
    assert "<Consolidated>VERSION: 1\nMars project is on track.</Consolidated>" in xml
    assert "- Alice wants Spanish &lt;replies&gt;" in xml
    assert "<SessionMemory>" in xml and "- Planning the venue today" in xml
    facts = xml[xml.index("<Facts>"):]
    assert facts.index("[user] Alice's email is alice@example.com (1h ago)") < facts.index(
        "[agent] Mars Festival budget is $50,000 (3d ago)")
    assert "Bob" not in xml and "Other agent" not in xml


def test_group_chat_context_has_no_user_memory(memory, clock):
    memory.ingest.ingest_message(message(1, session="s1", user="u1", users=["u1", "u2"]), T0)
    service, _, _ = _service(memory, clock)
    xml = service.get_memory_context(session_id="s1", user_id="u1")
    assert "<UserMemory>" not in xml and "alice@example.com" not in xml and "Spanish" not in xml
    assert "Mars Festival budget" in xml


def test_users_declared_at_session_start_make_a_group_chat_before_any_message(memory, clock):
    service, _, _ = _service(memory, clock)
    service.on_session_start(session_id="s9", user_ids=["u1", "u2"])
    assert "alice@example.com" not in service.get_memory_context(session_id="s9", user_id="u1")
    assert service.search_facts("Alice email", session_id="s9", user_id="u1") == [] or all(
        r["scope"] == "agent" for r in service.search_facts("Alice email", session_id="s9", user_id="u1"))


@pytest.mark.parametrize(
    ("settings", "toggles", "absent", "present"),
    [
        ({"always_in_context": False}, {}, ["<MemoryContext>"], []),
        ({"facts_fifo": False}, {}, ["<Facts>"], ["<AgentMemory>", "<UserMemory>"]),
        ({}, {"user_memory_enabled": False}, ["<UserMemory>", "[user]"], ["<AgentMemory>", "[agent]"]),
        ({}, {"agent_memory_enabled": False}, ["<AgentMemory>", "[agent]"], ["<UserMemory>", "[user]"]),
        ({}, {"agent_memory_enabled": False, "user_memory_enabled": False}, ["<Facts>", "<UserMemory>"], ["<SessionMemory>"]),
    ],
)
def test_toggles_remove_their_sections(memory, clock, settings, toggles, absent, present):
    memory.ingest.put_agent_settings(AgentSettings(agent_id="a1", **toggles))
    service, _, _ = _service(memory, clock, **settings)
    xml = service.get_memory_context(session_id="s1", user_id="u1")
    for text in absent:
        assert text not in xml
    for text in present:
        assert text in xml


def test_fifo_shows_at_most_the_limit_within_the_age_and_never_retired(store, clock):
    for i in range(45):
        _fact(store, f"n{i}", f"numbered fact {i:02d}", hours_ago=i)
    _fact(store, "old", "too old fact", hours_ago=24 * 8)
    store.facts.retire_fact("n0", clock.now(), "run-x")
    store.leases.bump_scope_versions("a1", ["agent"])
    service, _, _ = _service(store, clock)
    lines = [l for l in service.get_memory_context(session_id="s1", user_id="u1").splitlines() if l.startswith("  - [")]
    assert len(lines) == 40
    assert lines[0].startswith("  - [agent] numbered fact 01") and "numbered fact 40" in lines[-1]
    assert not any("too old" in l or "fact 00" in l for l in lines)


def test_cached_context_is_served_until_a_shown_scope_moves(memory, clock):
    service, _, _ = _service(memory, clock)
    first = service.get_memory_context(session_id="s1", user_id="u1")
    memory.facts.insert_fact(fact("late", "Late fact without a stamp", formed=clock.now()))
    assert service.get_memory_context(session_id="s1", user_id="u1") == first           # cached
    assert "Late fact" in service.get_memory_context(session_id="s1", user_id="u1", force_refresh=True)
    memory.facts.insert_fact(fact("later", "Later fact", formed=clock.now()))
    memory.leases.bump_scope_versions("a1", ["agent"])                         # a formation finished
    assert "Later fact" in service.get_memory_context(session_id="s1", user_id="u1")


def test_cached_context_expires_after_the_ttl(memory, clock):
    service, _, _ = _service(memory, clock)
    service.get_memory_context(session_id="s1", user_id="u1")
    memory.facts.insert_fact(fact("late", "Late fact without a stamp", formed=clock.now()))
    clock.advance(seconds=299)
    assert "Late fact" not in service.get_memory_context(session_id="s1", user_id="u1")
    clock.advance(seconds=2)
    assert "Late fact" in service.get_memory_context(session_id="s1", user_id="u1")


def test_a_cached_context_from_before_the_cache_kept_the_model_is_built_again_not_served(memory, clock):
    service, _, _ = _service(memory, clock)
    first = service.get_memory_context(session_id="s1", user_id="u1")
    memory.facts.insert_fact(fact("late", "Late fact without a stamp", formed=clock.now()))
    # an entry as an earlier version wrote it: the XML only, which the cache no longer reads
    old = memory.contexts.get_cached_context("s1", "u1").model_dump(mode="json", exclude={"content"}) | {"xml": first}
    memory.contexts.put_cached_context(CachedContext.model_validate(old))
    assert "Late fact" in service.get_memory_context(session_id="s1", user_id="u1")
    assert service.memory_context(session_id="s1", user_id="u1") == memory.contexts.get_cached_context("s1", "u1").content


def test_cached_context_persists_across_service_instances(memory, clock):
    _service(memory, clock)[0].get_memory_context(session_id="s1", user_id="u1")
    memory.facts.insert_fact(fact("late", "Late fact without a stamp", formed=clock.now()))
    assert "Late fact" not in _service(memory, clock)[0].get_memory_context(session_id="s1", user_id="u1")


def test_search_returns_the_result_contract_and_tracks_access(memory, clock):
    service, _, _ = _service(memory, clock)
    results = service.search_facts(["alice email", "festival budget"], session_id="s1", user_id="u1", top_k=5)
    assert {r["id"] for r in results} == {"f1", "f2"}
    assert set(results[0]) == {"id", "content", "scope", "formed_at", "updated_at", "age", "score"}
    assert results == sorted(results, key=lambda r: -r["score"])
    by_id = {r["id"]: r for r in results}
    assert by_id["f2"]["age"] == "1h ago" and by_id["f2"]["scope"] == "user"
    stored = {f.fact_id: f for f in memory.facts.get_facts(["f1", "f2", "f3"])}
    assert stored["f1"].access_count == 1 and stored["f2"].last_accessed_at == clock.now()
    assert stored["f3"].access_count == 0


def test_search_tolerates_typos(memory, clock):
    # three facts give BM25 scores far below the production 1.5 (idf is tiny): lower it here
    service, _, _ = _service(memory, clock, search_text_threshold=0.1)
    assert [r["id"] for r in service.search_facts("festivl budgte", session_id="s1", user_id="u1")][:1] == ["f1"]


def test_search_debug_reports_each_stage(memory, clock):
    service, _, _ = _service(memory, clock)
    answer = service.search_facts("alice email", session_id="s1", user_id="u1", debug=True)
    debug = answer["debug"]
    assert {"visibility", "embed", "search", "fetch", "total"} <= set(debug["timings_ms"])
    assert debug["scope_keys"] == ["agent", "user:u1"]
    assert debug["queries"][0]["fused"][0]["id"] == answer["results"][0]["id"] == "f2"
    assert debug["thresholds"]["rrf_k"] == 60


def test_search_is_not_offered_without_rag_or_memory(memory, clock):
    service, _, _ = _service(memory, clock, rag=False)
    assert service.tool_definition(session_id="s1", user_id="u1") is None
    assert service.search_facts("alice", session_id="s1", user_id="u1") == []
    memory.ingest.put_agent_settings(AgentSettings(agent_id="a1", agent_memory_enabled=False, user_memory_enabled=False))
    service, _, _ = _service(memory, clock)
    assert service.tool_definition(session_id="s1", user_id="u1") is None


def test_tool_definition_is_a_json_schema_with_one_to_three_queries(memory, clock):
    tool = _service(memory, clock)[0].tool_definition(session_id="s1", user_id="u1")
    assert tool["name"] == "search_facts"
    query = tool["parameters"]["properties"]["query"]
    assert {"type": "string", "minLength": 1} in query["anyOf"]
    assert any(o.get("maxItems") == 3 for o in query["anyOf"])
    assert tool["parameters"]["required"] == ["query"]


def test_a_models_filter_arguments_from_the_tool_definition_pass_straight_to_the_search(store, clock):
    store.ingest.put_agent_settings(AgentSettings(agent_id="a1", metadata_keys=["project"]))
    for fid, text, categories, project in (("f1", "The venue budget is 50,000 euros", ["finance"], "apollo"),
                                           ("f2", "The venue is in Lisbon", ["travel"], "apollo"),
                                           ("f3", "The venue budget for Zeus is 9,000 euros", ["finance"], "zeus")):
        f = fact(fid, text, embedding=EMB.embed([text]).vectors[0], model=EMB.model, formed=T0)
        store.facts.insert_fact(f.model_copy(update={"categories": categories, "metadata": {"project": project}}))
    store.leases.bump_scope_versions("a1", ["agent"])
    service = _service(store, clock)[0]
    properties = service.tool_definition(session_id="s1", user_id="u1")["parameters"]["properties"]
    assert properties["categories"]["items"] == {"type": "string"} and "categories" in properties["categories"]["description"]
    assert properties["metadata"]["type"] == "object" and "filterable" in properties["metadata"]["description"]
    arguments = {"query": "venue budget", "categories": ["finance"], "metadata": {"project": ["apollo"]}}
    hits = service.search_facts(**arguments, session_id="s1", user_id="u1")
    assert [(h["id"], h["categories"], h["metadata"]) for h in hits] == [("f1", ["finance"], {"project": "apollo"})]


@pytest.mark.parametrize(
    ("query", "top_k", "field"),
    [([], 10, "query"), (["a", "b", "c", "d"], 10, "query"), ("   ", 10, "query"), (42, 10, "query"),
     ("ok", 0, "top_k"), ("ok", 51, "top_k"), ("ok", True, "top_k")],
)
def test_search_rejects_bad_input_with_the_field_named(memory, clock, query, top_k, field):
    with pytest.raises(InvalidInput) as info:
        _service(memory, clock)[0].search_facts(query, session_id="s1", user_id="u1", top_k=top_k)
    assert info.value.field == field


def test_maybe_form_memories_publishes_validated_idempotent_events(store, clock):
    service, publisher, _ = _service(store, clock)
    msgs = [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "My email is a@b.c"},
            {"message_id": "m2", "role": "assistant", "content": "Noted."}]
    assert service.maybe_form_memories(msgs, session_id="s1", session_users=["u1"]) == 2
    assert service.maybe_form_memories(msgs[:1], session_id="s1", session_users=["u1"]) == 1
    events = publisher.events
    assert [e["type"] for e in events] == ["message.added"] * 3
    assert events[0]["event_id"] == events[2]["event_id"] != events[1]["event_id"]
    assert events[0]["agent_id"] == "a1" and events[0]["session_users"] == ["u1"]


def test_a_messages_metadata_travels_on_its_event(store, clock):
    service, publisher, _ = _service(store, clock)
    msgs = [{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "Ship it Friday",
             "metadata": {"project": "apollo", "urgent": True}},
            {"message_id": "m2", "role": "assistant", "content": "Noted."}]
    service.maybe_form_memories(msgs, session_id="s1", session_users=["u1"])
    first, second = (parse_event(e, max_message_bytes=32768) for e in publisher.events)
    assert first.metadata == {"project": "apollo", "urgent": True} and second.metadata == {}
    assert "metadata" not in publisher.events[0]["message"]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"message_id": "m2", "role": "user", "content": "no sender"}, "messages[1].sender_id"),
        ({"message_id": "m2", "role": "assistant", "content": "x", "metadata": {"tier": 1.5}},
         "messages[1].metadata.tier"),
        ({"message_id": "m2", "role": "assistant", "content": "x", "metadata": {"no spaces": 1}},
         "messages[1].metadata.no spaces"),
        ({"message_id": "m2", "role": "user", "sender_id": "u1", "content": "x", "colour": "red"}, "messages[1]"),
        ({"role": "assistant", "content": "no id"}, "messages[1].message_id"),
        ("just text", "messages[1]"),
    ],
)
def test_one_bad_message_publishes_nothing(store, clock, bad, field):
    service, publisher, _ = _service(store, clock)
    good = {"message_id": "m1", "role": "assistant", "content": "fine"}
    with pytest.raises(InvalidInput) as info:
        service.maybe_form_memories([good, bad], session_id="s1")
    assert info.value.field == field and publisher.events == []


def test_session_end_publishes_session_ended(store, clock):
    service, publisher, _ = _service(store, clock)
    service.on_session_end(session_id="s1")
    assert publisher.events[0]["type"] == "session.ended"
    assert publisher.events[0]["session_id"] == "s1" and publisher.events[0]["agent_id"] == "a1"
    assert isinstance(parse_event(publisher.events[0], max_message_bytes=32768), SessionEnded)


def test_each_end_of_a_resumed_session_is_its_own_event(store, clock):
    service, publisher, _ = _service(store, clock)
    service.on_session_end(session_id="s1")
    clock.advance(minutes=5)
    service.on_session_end(session_id="s1")
    first, second = publisher.events
    assert first["event_id"] != second["event_id"] and first["ended_at"] < second["ended_at"]


def test_process_cold_session_claims_once_and_starts_the_run(store, clock):
    for n in range(1, 5):
        store.ingest.ingest_message(message(n, session="s1"), T0)
    service, _, started = _service(store, clock)
    run_id = service.process_cold_session(session_id="s1")
    assert run_id is not None and started == [run_id]
    assert store.runs.get_run(run_id).reason == "cold"
    assert service.process_cold_session(session_id="s1") is None and started == [run_id]


def test_process_cold_session_leaves_a_warm_session_alone(store, clock):
    for n in range(1, 5):
        store.ingest.ingest_message(message(n, session="s1"), clock.now())
    service, _, started = _service(store, clock)
    assert service.process_cold_session(session_id="s1") is None and started == []
    assert service.process_cold_session(session_id="unknown") is None


def test_stats_and_consolidation_status_count_per_scope(memory, clock):
    service, _, _ = _service(memory, clock)
    stats = service.get_memory_stats(user_id="u1", session_id="s1")["scopes"]
    assert stats["agent"]["facts"] == 1 and stats["user:u1"]["facts"] == 1
    assert stats["user:u1"]["reflections_unabsorbed"] == 1 and stats["agent"]["blob_words"] == 7
    assert "facts" not in stats["session:s1"]
    status = service.get_consolidation_status(user_id="u1", session_id="s1")["scopes"]
    assert status["user:u1"] == {
        "scope": "user", "buffered": 1, "threshold": 4, "due": False, "blob_words": 4, "word_limit": 300,
        "blob_version": 1, "paused": False,
    }
    assert status["session:s1"]["buffered"] == 1 and status["agent"]["threshold"] == 10


def test_async_variants_give_the_same_answers(memory, clock):
    service, _, _ = _service(memory, clock)

    async def main():
        return await asyncio.gather(
            service.aget_memory_context(session_id="s1", user_id="u1"),
            service.asearch_facts("alice email", session_id="s1", user_id="u1"),
        )

    xml, results = asyncio.run(main())
    assert xml == service.get_memory_context(session_id="s1", user_id="u1")
    assert results[0]["id"] == "f2"


# Every method that takes a session and a user: a positional swap of the two (both are plain
# strings) would read another scope and silently answer "" or [], so neither is positional.
_POSITIONAL_CALLS = [
    ("get_memory_context", ("s1", "u1")),
    ("search_facts", ("alice email", "u1", "s1")),
    ("tool_definition", ("u1", "s1")),
    ("get_memory_stats", ("u1", "s1")),
    ("get_consolidation_status", ("u1", "s1")),
    ("on_session_start", ("s1", ["u1"])),
    ("on_session_end", ("s1",)),
    ("process_cold_session", ("s1",)),
    ("maybe_form_memories", ("s1", [])),
]


@pytest.mark.parametrize(("method", "args"), _POSITIONAL_CALLS, ids=[m for m, _ in _POSITIONAL_CALLS])
def test_session_and_user_ids_are_refused_positionally(memory, clock, method, args):
    service, _, _ = _service(memory, clock)
    with pytest.raises(TypeError, match="positional"):
        getattr(service, method)(*args)


@pytest.mark.parametrize(("method", "args"), _POSITIONAL_CALLS, ids=[m for m, _ in _POSITIONAL_CALLS])
def test_async_twins_refuse_them_positionally_too(memory, clock, method, args):
    service, _, _ = _service(memory, clock)
    with pytest.raises(TypeError, match="positional"):
        asyncio.run(getattr(service, "a" + method)(*args))


def test_swapped_keywords_cannot_happen_and_named_ones_read_the_right_scope(memory, clock):
    service, _, _ = _service(memory, clock)
    assert "alice@example.com" in service.get_memory_context(user_id="u1", session_id="s1")
    assert service.tool_definition(user_id="u1", session_id="s1") is not None
    assert "user:u1" in service.get_memory_stats(session_id="s1", user_id="u1")["scopes"]


class DownEmbedder:
    model, dim = EMB.model, EMB.dim

    def embed(self, texts):
        from pipeline.errors import TransientError

        raise TransientError("embedding provider timed out")


def test_search_falls_back_to_text_when_the_embedder_is_down(memory, clock):
    service = MemoryService("a1", settings=Settings(_env_file=None, search_text_threshold=0.1), store=memory,
                            embedder=DownEmbedder(), clock=clock)
    answer = service.search_facts("festival budget", session_id="s1", user_id="u1", debug=True)
    assert [r["id"] for r in answer["results"]] == ["f1"]
    assert "timed out" in answer["debug"]["embed_error"]
    assert answer["debug"]["queries"][0]["semantic"] == []


def test_context_fits_the_budget_from_settings_and_says_what_it_left_out(memory, clock):
    whole_service, _, _ = _service(memory, clock)
    whole = whole_service.get_memory_context(session_id="s1", user_id="u1")
    assert "<Omitted" not in whole
    budget = int(len(whole) / 4.5 * 0.6)
    service, _, _ = _service(memory, clock, context_max_tokens=budget)
    packed = service.get_memory_context(session_id="s1", user_id="u1", force_refresh=True)
    assert len(packed) / 4.5 <= budget
    assert "<Omitted" in packed
    assert "Alice prefers short answers." in packed     # blobs go first


def test_a_context_asked_with_another_budget_is_not_served_from_the_cache(memory, clock):
    service, _, _ = _service(memory, clock)
    whole = service.get_memory_context(session_id="s1", user_id="u1")
    small = service.get_memory_context(session_id="s1", user_id="u1", max_tokens=40)
    assert len(small) / 4.5 <= 40 and small != whole
    assert service.get_memory_context(session_id="s1", user_id="u1") == whole


@pytest.mark.parametrize("bad", [0, -5, 2.5, "100", True])
def test_a_budget_that_is_not_a_positive_whole_number_is_refused(memory, clock, bad):
    service, _, _ = _service(memory, clock)
    with pytest.raises(InvalidInput, match="max_tokens"):
        service.get_memory_context(session_id="s1", user_id="u1", max_tokens=bad)


def test_a_service_built_alone_reads_and_says_which_client_it_lacks_to_publish(memory, clock):
    from pipeline.errors import ConfigurationError

    service = MemoryService("a1", settings=Settings(_env_file=None), store=memory, embedder=EMB, clock=clock)
    assert "Alice prefers short answers." in service.get_memory_context(session_id="s1", user_id="u1")
    with pytest.raises(ConfigurationError, match="no publisher: build it with workers.client.memory_service"):
        service.on_session_end(session_id="s1")


def test_stats_show_the_tokens_and_cost_of_each_scope(memory, clock):
    from pipeline import sweep
    from pipeline.cost import price_models
    from schemas.documents import LLMUsage, StageRecord, UsageRecord

    for n in range(1, 5):
        memory.ingest.ingest_message(message(n, session="s1"), clock.now())
    clock.advance(minutes=30)
    service, _, _ = _service(memory, clock)
    [run_id] = sweep.sweep_cold_sessions(memory, service.settings, clock.now()).run_ids
    rows = price_models({"gpt-6-luna": {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 1_000_000,
                                        "output_tokens": 0}}, {"gpt-6-luna": {"input": 0.10, "output": 0.50}})
    memory.runs.start_stage(run_id, "extract_facts", clock.now())
    memory.runs.complete_stage(run_id, "extract_facts", StageRecord(
        status="done", output={}, finished_at=clock.now(), attempts=1,
        usage=LLMUsage(calls=1, input_tokens=1_000_000, by_model=rows)))
    memory.stats.record_usage(UsageRecord(usage_id="end-s9", agent_id=service.agent_id, session_id="s9",
                                    stage="consolidate_session", at=clock.now(),
                                    by_model={"mystery": {"kind": "llm", "provider": "openai", "calls": 1,
                                                          "input_tokens": 7, "output_tokens": 3, "usd": None,
                                                          "price": "unpriced"}}))
    stats = service.get_memory_stats(user_id=memory.runs.get_run(run_id).user_ids[0], session_id="s1")["scopes"]
    agent = stats["agent"]
    assert agent["tokens"] == {"input": 1_000_007, "output": 3, "embedding": 0}
    assert agent["cost"]["usd"] == pytest.approx(0.10) and agent["cost"]["unpriced"] == ["mystery"]
    session = stats["session:s1"]
    assert session["cost"] == {"usd": pytest.approx(0.10), "unpriced": [], "text": "$0.100000"}
    [user_key] = [k for k in stats if k.startswith("user:")]
    assert stats[user_key]["tokens"]["input"] == 1_000_000


_YEAR_1_AT_14 = "0001-01-01T00:00:00+14:00"


@pytest.mark.parametrize(("call", "field", "why"), [
    (lambda s: s.get_memory_context(session_id="s1", user_id="u1", as_of=datetime.fromisoformat(_YEAR_1_AT_14)),
     "as_of", "from 1900-01-01T00:00:00Z"),
    (lambda s: s.get_memory_context(session_id="s1", user_id="u\udc00"), "user_id", "a lone surrogate"),
    (lambda s: s.get_memory_context(session_id="s\x00", user_id="u1"), "session_id", "a NUL character"),
    (lambda s: s.search_facts("Porto \udc00", session_id="s1", user_id="u1"), "query", "a lone surrogate"),
    (lambda s: s.search_facts(["Porto", "a\x00"], session_id="s1", user_id="u1"), "query[1]", "a NUL character"),
    (lambda s: s.search_facts("Porto", session_id="s1", user_id="u1", top_k=10**30), "top_k", "from 1 to 50"),
    (lambda s: s.maybe_form_memories([{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "\udc00"}],
                                     session_id="s1"), "messages[0].content", "a lone surrogate"),
    (lambda s: s.maybe_form_memories([{"message_id": "m1", "role": "user", "sender_id": "u1", "content": "hi",
                                       "created_at": _YEAR_1_AT_14}], session_id="s1"),
     "messages[0].created_at", "from 1900-01-01T00:00:00Z"),
    (lambda s: s.on_session_start(session_id="s1", user_ids=["u\x01"]), "user_ids[0]", "a control character"),
    (lambda s: s.get_memory_stats(user_id="\udc00"), "user_id", "a lone surrogate"),
])
def test_hostile_input_in_process_is_invalid_input_naming_the_field(store, clock, call, field, why):
    service, publisher, _ = _service(store, clock)
    with pytest.raises(InvalidInput) as info:
        call(service)
    assert info.value.field == field and why in info.value.reason, (info.value.field, info.value.reason)
    assert publisher.events == []
