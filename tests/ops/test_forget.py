"""forget-user: nothing of the user is left anywhere, and nobody else loses anything."""

from __future__ import annotations

import json

import pytest

from ops import cli
from ops.commands import forget as forget_command
from usecases.erase import forget_user
from usecases.verify import traces
from pipeline.clock import FrozenClock
from pipeline.errors import InvalidInput
from pipeline.ingest import ingest_raw_event
from pipeline.store import open_store
from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from schemas.context import ContextBlock, ContextFact
from schemas.documents import (
    CachedContext,
    ConsolidatedBlob,
    Fact,
    Reflection,
    StageRecord,
    scope_key,
)
from pipeline.store.mongo import MongoStore
from schemas.settings import Settings
from testkit.mongo_emulation import emulated_database

GONE = "user-7f3a-forgetme"
KEPT = "user-0b2c-staying"
GONE_TEXTS = {
    ("a1", "s-gone"): ["My passport number is PX-93817-QUOKKA", "I was born in Tromso near the fjord"],
    ("a1", "s-group"): ["Count me in for the ZEBRA-ALPHA offsite"],
    ("a2", "s2-gone"): ["Under agent two my code word is PANGOLIN-GAMMA"],
}
KEPT_TEXTS = {
    ("a1", "s-kept"): ["I am vegan and I cycle to work OKAPI-BETA"],
    ("a1", "s-group"): ["I will bring the projector to the offsite"],
}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}")


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


def _message(agent, session, user, text, i, users, clock):
    return {
        "type": "message.added", "event_id": f"{session}-{user}-{i}", "agent_id": agent, "session_id": session,
        "session_users": users,
        "message": {"message_id": f"{session}-{user}-{i}", "role": "user", "sender_id": user,
                    "content": text, "created_at": clock.now().isoformat()},
    }


def _populate(store, settings, clock) -> None:
    ingest = lambda raw: ingest_raw_event(raw, store, settings, clock)  # noqa: E731
    for owner, texts_by_session in ((GONE, GONE_TEXTS), (KEPT, KEPT_TEXTS)):
        for (agent, session), texts in texts_by_session.items():
            users = [GONE, KEPT] if session == "s-group" else [owner]
            for i, text in enumerate(texts):
                assert ingest(_message(agent, session, owner, text, i, users, clock)).status == "accepted"
    for agent, session in (("a1", "s-gone"), ("a1", "s-kept"), ("a2", "s2-gone")):
        ingest({"type": "message.added", "event_id": f"{session}-reply", "agent_id": agent, "session_id": session,
                "message": {"message_id": f"{session}-reply", "role": "assistant", "content": "Noted, thank you.",
                            "created_at": clock.now().isoformat()}})
    # rejected events that name each user (content missing)
    for user in (GONE, KEPT):
        bad = _message("a1", f"s-bad-{user}", user, "x", 0, [user], clock)
        del bad["message"]["content"]
        assert ingest(bad).status == "rejected"
    now = clock.now()
    # run records whose stage outputs quote the user's text
    for agent, session, owner, texts in (("a1", "s-gone", GONE, GONE_TEXTS), ("a1", "s-kept", KEPT, KEPT_TEXTS)):
        result = ingest({"type": "session.ended", "event_id": f"{session}-end", "agent_id": agent, "session_id": session})
        run = result.run
        assert run is not None and owner in run.user_ids
        store.runs.start_stage(run.run_id, "extract_facts", now)
        store.runs.complete_stage(run.run_id, "extract_facts", StageRecord(
            status="done", output={"facts": [{"content": texts[(agent, session)][0], "scope": "user", "user_id": owner}]},
            started_at=now, finished_at=now, duration_ms=1.0,
        ))
    # facts: user-scoped ones (one updated, so it has history), and an agent fact that stays
    for agent, user, text in (("a1", GONE, "The passport number is PX-93817-QUOKKA"),
                              ("a2", GONE, "Code word PANGOLIN-GAMMA"), ("a1", KEPT, "Is vegan OKAPI-BETA")):
        key = scope_key("user", user_id=user)
        store.facts.insert_fact(Fact(fact_id=f"f-{agent}-{user}", agent_id=agent, scope="user", user_id=user, scope_key=key,
                               content=text, hash=text_hash(text), source_session_id="s", formed_at=now))
    store.facts.update_fact(f"f-a1-{GONE}", FactUpdate(
        content="Passport PX-93817-QUOKKA, born in Tromso", hash=text_hash("p2"), embedding=None,
        embedding_model=None, run_id="r-upd", now=now))
    store.facts.insert_fact(Fact(fact_id="f-agent", agent_id="a1", scope="agent", scope_key="agent",
                           content="The offsite is in Lisbon", hash=text_hash("The offsite is in Lisbon"), formed_at=now))
    store.reflections.insert_reflections([
        Reflection(reflection_id="r-gone", agent_id="a1", scope="user", user_id=GONE,
                   scope_key=scope_key("user", user_id=GONE), content="Wants replies about Tromso", formed_at=now),
        Reflection(reflection_id="r-gone-session", agent_id="a1", scope="session", session_id="s-gone",
                   scope_key=scope_key("session", session_id="s-gone"), content="Talked about PX-93817-QUOKKA", formed_at=now),
        Reflection(reflection_id="r-kept", agent_id="a1", scope="user", user_id=KEPT,
                   scope_key=scope_key("user", user_id=KEPT), content="Likes cycling", formed_at=now),
        Reflection(reflection_id="r-agent", agent_id="a1", scope="agent", scope_key="agent",
                   content="Keep answers short", formed_at=now),
    ])
    for agent, user, text in (("a1", GONE, "Born in Tromso."), ("a2", GONE, "PANGOLIN-GAMMA."), ("a1", KEPT, "Vegan.")):
        store.blobs.save_blob(ConsolidatedBlob(agent_id=agent, scope="user", scope_key=scope_key("user", user_id=user),
                                         user_id=user, consolidated_content=text, word_limit=300, version=1), 0)
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="agent", scope_key="agent",
                                     consolidated_content="VERSION: 1\nBe brief.", word_limit=1200, version=1), 0)
    store.leases.bump_scope_versions("a1", [scope_key("user", user_id=GONE), scope_key("user", user_id=KEPT)])
    for session, user in (("s-gone", GONE), ("s-kept", KEPT)):
        shown = ContextBlock(facts=[ContextFact(scope="user", text=f"Memory of {user}", age="0m ago")])
        store.contexts.put_cached_context(CachedContext(session_id=session, user_id=user, agent_id="a1", content=shown,
                                               built_at=now))


def _open(kind: str, settings):
    if kind == "sqlite":
        return open_store(settings)
    return MongoStore(emulated_database(), prefix=settings.collection_prefix)


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, settings, clock):
    store = _open(request.param, settings)
    store.create_indexes()
    _populate(store, settings, clock)
    yield store
    store.close()


@pytest.fixture
def sqlite_store(settings, clock):
    store = _open("sqlite", settings)
    store.create_indexes()
    _populate(store, settings, clock)
    yield store
    store.close()


def _walk(value, path):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key, f"{path}.<key>")
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, (bytes, bytearray)):
        yield path, bytes(value).decode("utf-8", errors="ignore")
    elif value is not None:
        yield path, str(value)


def text_traces(dump, needles) -> list[str]:
    """Where any of these distinctive strings (the user's id, their quoted texts) still appears
    anywhere in a dump. Fine for the fixture's unique strings; ``usecases.verify.traces`` is what
    checks a real user id (by field, never by substring)."""
    return [path for collection, rows in dump.items() for i, row in enumerate(rows)
            for path, text in _walk(row, f"{collection}[{i}]") if any(n in text for n in needles)]


def _gone_needles(agents=("a1", "a2")) -> list[str]:
    return [GONE] + [t for (agent, _), texts in GONE_TEXTS.items() if agent in agents for t in texts]


def test_the_fixture_really_holds_the_user_everywhere(store):
    found = {path.split("[")[0] for path in text_traces(store.admin.dump_all(), _gone_needles())}
    assert {"facts", "reflections", "consolidated", "messages", "runs", "rejected", "sessions", "contexts"} <= found


def test_forgetting_under_every_agent_leaves_no_trace_of_the_user_anywhere(store):
    counts = forget_user(store, GONE).counts
    assert text_traces(store.admin.dump_all(), _gone_needles()) == []
    assert counts["facts"] == 2 and counts["runs_deleted"] + counts["runs_rewritten"] >= 1 and counts["rejected"] == 1


def test_forgetting_leaves_other_users_data_untouched(store):
    forget_user(store, GONE)
    dump = store.admin.dump_all()
    assert len(text_traces(dump, ["I am vegan and I cycle to work OKAPI-BETA"])) >= 1
    assert [f.content for f in store.facts.list_facts("a1", scope_key("user", user_id=KEPT))] == ["Is vegan OKAPI-BETA"]
    assert [f.content for f in store.facts.list_facts("a1", "agent")] == ["The offsite is in Lisbon"]
    assert [r.content for r in store.reflections.list_reflections("a1", scope_key("user", user_id=KEPT))] == ["Likes cycling"]
    assert [r.content for r in store.reflections.list_reflections("a1", "agent")] == ["Keep answers short"]
    assert store.blobs.get_blob("a1", scope_key("user", user_id=KEPT)).consolidated_content == "Vegan."
    assert store.blobs.get_blob("a1", "agent").consolidated_content == "VERSION: 1\nBe brief."
    assert store.contexts.get_cached_context("s-kept", KEPT) is not None
    assert [r.session_id for r in store.runs.list_runs(session_id="s-kept")] == ["s-kept"]
    assert len([r for r in store.ingest.list_rejections() if KEPT in r.raw]) == 1
    assert KEPT in store.ingest.get_session("s-group").users


def test_forgetting_under_one_agent_keeps_the_user_under_the_others(store):
    counts = forget_user(store, GONE, "a1").counts
    dump = store.admin.dump_all()
    a1_rows = {name: [row for row in rows if row.get("agent_id") in ("a1", None)] for name, rows in dump.items()}
    assert text_traces(a1_rows, _gone_needles(agents=("a1",))) == []
    assert counts["facts"] == 1
    assert [f.content for f in store.facts.list_facts("a2", scope_key("user", user_id=GONE))] == ["Code word PANGOLIN-GAMMA"]
    assert store.blobs.get_blob("a2", scope_key("user", user_id=GONE)).consolidated_content == "PANGOLIN-GAMMA."
    assert [m.content for m in store.ingest.get_messages("s2-gone", 1, 10) if m.role == "user"] == [
        "Under agent two my code word is PANGOLIN-GAMMA"
    ]


@pytest.mark.parametrize("bad", [("", None), ("   ", None), (GONE, "")])
def test_a_missing_user_or_agent_is_refused(store, bad):
    with pytest.raises(InvalidInput):
        forget_user(store, *bad)


def test_the_command_prints_counts_and_verifies(sqlite_store, settings, monkeypatch, capsys):
    monkeypatch.setattr(forget_command, "get_settings", lambda: settings)
    assert cli.main(["forget-user", "--user", GONE, "--all-agents", "--verify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["deleted"]["facts"] == 2 and out["traces"] == []
    assert cli.main(["forget-user", "--user", KEPT, "--agent", "a1"]) == 0
    text = capsys.readouterr().out
    assert f"forgot user {KEPT} under agent a1:" in text and "facts" in text


def test_verify_checks_provenance_not_strings(sqlite_store, settings, monkeypatch, capsys):
    monkeypatch.setattr(forget_command, "get_settings", lambda: settings)
    text = "The venue shortlist has Quokka Hall"  # said by the user, stored as agent memory
    sqlite_store.facts.insert_fact(Fact(fact_id="f-planted", agent_id="a1", scope="agent", scope_key="agent", content=text,
                                  hash=text_hash(text), source_user_ids=[GONE], formed_at=FrozenClock().now()))
    planted = [t for t in traces(sqlite_store.admin.dump_all(), GONE) if t.endswith(".source_user_ids")]
    assert len(planted) == 1 and planted[0].startswith("facts[")
    monkeypatch.setattr("ops.stores.open_existing", lambda _settings: _Unclosed(sqlite_store))
    # an erasure that could not remove what rests on the user: --verify says so and fails
    monkeypatch.setattr(type(sqlite_store.admin), "erase_memory", lambda self, plan: None)

    assert cli.main(["forget-user", "--user", GONE, "--all-agents", "--verify", "--json"]) == 1

    out = json.loads(capsys.readouterr().out)
    assert out["traces"] == ["facts.source_user_ids: 1"]
    monkeypatch.undo()
    monkeypatch.setattr(forget_command, "get_settings", lambda: settings)
    monkeypatch.setattr("ops.stores.open_existing", lambda _settings: _Unclosed(sqlite_store))
    assert cli.main(["forget-user", "--user", GONE, "--all-agents", "--verify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["deleted"]["facts_by_source"] == 1 and sqlite_store.facts.get_facts(["f-planted"]) == []
    assert out["traces"] == []


def test_verify_lists_what_has_no_attribution_apart_and_strict_fails_on_it(sqlite_store, settings, monkeypatch,
                                                                            capsys):
    monkeypatch.setattr(forget_command, "get_settings", lambda: settings)
    # the fixture's agent fact and reflection were stored without sources, the agent blob's text
    # was merged by nothing: nobody can tell whose they are
    assert cli.main(["forget-user", "--user", GONE, "--all-agents", "--verify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["traces"] == [] and sorted(out["unattributed"]) == [
        "consolidated:a1/agent: text of unknown origin", "facts:f-agent", "reflections:r-agent"]
    assert cli.main(["forget-user", "--user", GONE, "--all-agents", "--verify", "--strict", "--json"]) == 1
    assert cli.main(["forget-user", "--user", GONE, "--all-agents", "--verify", "--strict"]) == 1
    assert "unattributed (no source recorded; kept, fails --strict): 3" in capsys.readouterr().out


def test_the_command_needs_an_agent_or_all_agents(capsys):
    with pytest.raises(SystemExit):
        cli.main(["forget-user", "--user", GONE])


# ---------------------------------------------------------------- verification by id field
SHORT, LONGER = "u1", "u10"  # one id is a prefix of the other


def _vectors_mentioning(text: str) -> str:
    """Base64 float32 vectors (as a run's embed_facts output holds them) in which ``text``
    occurs by chance, as it does for short ids in real runs."""
    import base64
    import random

    import numpy as np

    rng = random.Random(3)
    while True:
        vector = np.asarray([rng.uniform(-1, 1) for _ in range(384)], dtype=np.float32)
        encoded = base64.b64encode(vector.tobytes()).decode("ascii")
        if text in encoded:
            return encoded


def _populate_prefix_users(store, settings, clock) -> None:
    ingest = lambda raw: ingest_raw_event(raw, store, settings, clock)  # noqa: E731
    for user in (SHORT, LONGER):
        for i in range(2):
            assert ingest(_message("a1", f"s-{user}", user, f"note {i} of someone", i, [user], clock)).status == "accepted"
    bad = _message("a1", f"s-bad-{LONGER}", LONGER, "x", 0, [LONGER], clock)
    del bad["message"]["content"]
    assert ingest(bad).status == "rejected"
    now = clock.now()
    run = ingest({"type": "session.ended", "event_id": "end-10", "agent_id": "a1", "session_id": f"s-{LONGER}"}).run
    store.runs.start_stage(run.run_id, "embed_facts", now)
    store.runs.complete_stage(run.run_id, "embed_facts", StageRecord(
        status="done", output={"vectors": _vectors_mentioning(SHORT), "dim": 384},
        started_at=now, finished_at=now, duration_ms=1.0,
    ))
    key = scope_key("user", user_id=LONGER)
    store.facts.insert_fact(Fact(fact_id="f-10", agent_id="a1", scope="user", user_id=LONGER, scope_key=key,
                           content=f"Likes the {SHORT} bus line", hash=text_hash("bus"), formed_at=now))
    assert store.leases.acquire_lease(f"consolidate:a1:{key}", "holder-10", now, 300)


@pytest.mark.parametrize("kind", ["sqlite", "mongo"])
def test_verify_never_reads_another_users_vectors_ids_or_text_as_a_trace(kind, settings, clock, monkeypatch, capsys):
    store = _open(kind, settings)
    store.create_indexes()
    _populate_prefix_users(store, settings, clock)
    assert SHORT in json.dumps(store.admin.dump_all(), default=str)  # the substring is there to be misread
    monkeypatch.setattr(forget_command, "get_settings", lambda: settings)
    monkeypatch.setattr("ops.stores.open_existing", lambda _settings: _Unclosed(store))
    assert cli.main(["forget-user", "--user", SHORT, "--all-agents", "--verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["traces"] == []
    # and the other user lost nothing: their lease, rejected event, run and fact stay
    assert not store.leases.acquire_lease(f"consolidate:a1:user:{LONGER}", "someone-else", clock.now(), 300)
    assert len(store.ingest.list_rejections()) == 1
    assert [r.session_id for r in store.runs.list_runs()] == [f"s-{LONGER}"]
    assert [f.fact_id for f in store.facts.list_facts("a1", scope_key("user", user_id=LONGER))] == ["f-10"]
    store.close()


class _Unclosed:
    """The test's store, handed to the command, which closes it: the test keeps using it."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def close(self) -> None:
        pass


def test_verify_finds_the_user_in_every_id_field_and_names_the_field(settings, clock):
    now = clock.now()
    dump = {
        "facts": [{"user_id": SHORT, "scope_key": f"user:{SHORT}", "embedding": [0.1] * 4}],
        "messages": [{"sender_id": SHORT, "session_users": [LONGER, SHORT], "content": "hi"}],
        "sessions": [{"users": [SHORT]}],
        "runs": [{"user_ids": [SHORT], "stages": {"extract_facts": {"output": {"facts": [
            {"content": "x", "user_id": SHORT, "source_user_ids": [SHORT]}]}}}}],
        "contexts": [{"user_id": "", "versions": {f"user:{SHORT}": 3}, "xml": f"<M>{SHORT}</M>"}],
        "rejected": [{"agent_id": "a1", "raw": json.dumps({"message": {"sendr": SHORT}})},
                     {"agent_id": "a1", "raw": f"not json, from {SHORT}"}],
        "leases": [{"name": f"consolidate:a1:user:{SHORT}", "holder": "h", "expires_at": now.isoformat()}],
    }
    assert sorted(traces(dump, SHORT)) == sorted([
        "facts[0].user_id", "facts[0].scope_key",
        "messages[0].sender_id", "messages[0].session_users",
        "sessions[0].users",
        "runs[0].user_ids", "runs[0].stages.extract_facts.output.facts[0].user_id",
        "runs[0].stages.extract_facts.output.facts[0].source_user_ids",
        "contexts[0].versions",
        "rejected[0].raw:message.sendr", "rejected[1].raw:<text>",
        f"leases[0]:consolidate:a1:user:{SHORT}",
    ])
    assert traces(dump, LONGER) == ["messages[0].session_users"]
    assert traces(dump, SHORT, "a2") == ["facts[0].user_id", "facts[0].scope_key", "messages[0].sender_id",
                                         "messages[0].session_users", "sessions[0].users", "runs[0].user_ids",
                                         "runs[0].stages.extract_facts.output.facts[0].user_id",
                                         "runs[0].stages.extract_facts.output.facts[0].source_user_ids",
                                         "contexts[0].versions"]
