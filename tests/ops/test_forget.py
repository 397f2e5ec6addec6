"""forget-user: nothing of the user is left anywhere, and nobody else loses anything."""

from __future__ import annotations

import json

import pytest

from ops import cli
from ops.commands import forget as forget_command
from ops.forget import forget_user, traces
from pipeline.clock import FrozenClock
from pipeline.errors import InvalidInput
from pipeline.ingest import ingest_raw_event
from pipeline.store import open_store
from pipeline.text import text_hash
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
from tests.support.mongo_emulation import emulated_database

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
        store.start_stage(run.run_id, "extract_facts", now)
        store.complete_stage(run.run_id, "extract_facts", StageRecord(
            status="done", output={"facts": [{"content": texts[(agent, session)][0], "scope": "user", "user_id": owner}]},
            started_at=now, finished_at=now, duration_ms=1.0,
        ))
    # facts: user-scoped ones (one updated, so it has history), and an agent fact that stays
    for agent, user, text in (("a1", GONE, "The passport number is PX-93817-QUOKKA"),
                              ("a2", GONE, "Code word PANGOLIN-GAMMA"), ("a1", KEPT, "Is vegan OKAPI-BETA")):
        key = scope_key("user", user_id=user)
        store.insert_fact(Fact(fact_id=f"f-{agent}-{user}", agent_id=agent, scope="user", user_id=user, scope_key=key,
                               content=text, hash=text_hash(text), source_session_id="s", formed_at=now))
    store.update_fact(f"f-a1-{GONE}", content="Passport PX-93817-QUOKKA, born in Tromso", hash=text_hash("p2"),
                      embedding=None, embedding_model=None, run_id="r-upd", now=now)
    store.insert_fact(Fact(fact_id="f-agent", agent_id="a1", scope="agent", scope_key="agent",
                           content="The offsite is in Lisbon", hash=text_hash("The offsite is in Lisbon"), formed_at=now))
    store.insert_reflections([
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
        store.save_blob(ConsolidatedBlob(agent_id=agent, scope="user", scope_key=scope_key("user", user_id=user),
                                         user_id=user, consolidated_content=text, word_limit=300, version=1), 0)
    store.save_blob(ConsolidatedBlob(agent_id="a1", scope="agent", scope_key="agent",
                                     consolidated_content="VERSION: 1\nBe brief.", word_limit=1200, version=1), 0)
    store.bump_scope_versions("a1", [scope_key("user", user_id=GONE), scope_key("user", user_id=KEPT)])
    for session, user in (("s-gone", GONE), ("s-kept", KEPT)):
        store.put_cached_context(CachedContext(session_id=session, user_id=user, agent_id="a1",
                                               xml=f"<Memory>{user}</Memory>", built_at=now))


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


def _gone_needles(agents=("a1", "a2")) -> list[str]:
    return [GONE] + [t for (agent, _), texts in GONE_TEXTS.items() if agent in agents for t in texts]


def test_the_fixture_really_holds_the_user_everywhere(store):
    found = {path.split("[")[0] for path in traces(store.dump_all(), _gone_needles())}
    assert {"facts", "reflections", "consolidated", "messages", "runs", "rejected", "sessions", "contexts"} <= found


def test_forgetting_under_every_agent_leaves_no_trace_of_the_user_anywhere(store):
    counts = forget_user(store, GONE)
    assert traces(store.dump_all(), _gone_needles()) == []
    assert counts["facts"] == 2 and counts["runs"] >= 1 and counts["rejected"] == 1


def test_forgetting_leaves_other_users_data_untouched(store):
    forget_user(store, GONE)
    dump = store.dump_all()
    assert len(traces(dump, ["I am vegan and I cycle to work OKAPI-BETA"])) >= 1
    assert [f.content for f in store.list_facts("a1", scope_key("user", user_id=KEPT))] == ["Is vegan OKAPI-BETA"]
    assert [f.content for f in store.list_facts("a1", "agent")] == ["The offsite is in Lisbon"]
    assert [r.content for r in store.list_reflections("a1", scope_key("user", user_id=KEPT))] == ["Likes cycling"]
    assert [r.content for r in store.list_reflections("a1", "agent")] == ["Keep answers short"]
    assert store.get_blob("a1", scope_key("user", user_id=KEPT)).consolidated_content == "Vegan."
    assert store.get_blob("a1", "agent").consolidated_content == "VERSION: 1\nBe brief."
    assert store.get_cached_context("s-kept", KEPT) is not None
    assert [r.session_id for r in store.list_runs(session_id="s-kept")] == ["s-kept"]
    assert len([r for r in store.list_rejections() if KEPT in r.raw]) == 1
    assert KEPT in store.get_session("s-group").users


def test_forgetting_under_one_agent_keeps_the_user_under_the_others(store):
    counts = forget_user(store, GONE, "a1")
    dump = store.dump_all()
    a1_rows = {name: [row for row in rows if row.get("agent_id") in ("a1", None)] for name, rows in dump.items()}
    assert traces(a1_rows, _gone_needles(agents=("a1",))) == []
    assert counts["facts"] == 1
    assert [f.content for f in store.list_facts("a2", scope_key("user", user_id=GONE))] == ["Code word PANGOLIN-GAMMA"]
    assert store.get_blob("a2", scope_key("user", user_id=GONE)).consolidated_content == "PANGOLIN-GAMMA."
    assert [m.content for m in store.get_messages("s2-gone", 1, 10) if m.role == "user"] == [
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


def test_the_command_needs_an_agent_or_all_agents(capsys):
    with pytest.raises(SystemExit):
        cli.main(["forget-user", "--user", GONE])
