"""Property: whatever mix of agents, users and group chats is stored, the context and the search
results of (agent A, user U, session S) never show another agent's memory, another user's
user-scoped memory, or any user memory in a group chat. Runs on both store adapters."""

import re
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.service import MemoryService
from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore
from pipeline.text import text_hash
from schemas.documents import ConsolidatedBlob, Fact, Reflection, scope_key
from schemas.settings import Settings
from testkit.documents import T0, message
from testkit.mongo_emulation import emulated_database

AGENTS = ["A", "B"]
USERS = ["U", "V", "W"]
SESSIONS = ["s1", "s2", "s3"]
EMB = HashingEmbedder(32)
NOW = T0 + timedelta(days=1)
# every threshold off: anything visible may show, so only the pre-filter keeps memory apart
OPEN = dict(search_semantic_threshold=0.0, search_text_threshold=0.0, search_rrf_threshold=0.0)

owners = st.tuples(st.sampled_from(AGENTS), st.sampled_from(["agent", "user"]), st.sampled_from(USERS))
world = st.fixed_dictionaries({
    "facts": st.lists(owners, min_size=1, max_size=12),
    "reflections": st.lists(st.tuples(st.sampled_from(AGENTS), st.sampled_from(["agent", "user", "session"]),
                                      st.sampled_from(USERS), st.sampled_from(SESSIONS)), max_size=8),
    "blobs": st.lists(st.tuples(st.sampled_from(AGENTS), st.sampled_from(["agent", "user", "session"]),
                                st.sampled_from(USERS), st.sampled_from(SESSIONS)), max_size=6, unique=True),
    # which humans wrote in each session (of agent A); two or more make a group chat
    "sessions": st.dictionaries(st.sampled_from(SESSIONS), st.sets(st.sampled_from(USERS), min_size=1, max_size=2)),
    "reader": st.tuples(st.sampled_from(USERS), st.sampled_from(SESSIONS)),
})


def _tag(agent, scope, user, session, n):
    """A content marker that says whose memory it is; every fact shares the query words."""
    owner = {"agent": f"own{agent}agent", "user": f"own{agent}user{user}", "session": f"own{agent}sess{session}"}[scope]
    return f"memory note {owner} item{n}"


def _key(scope, user, session):
    return scope_key(scope, user_id=user if scope == "user" else None, session_id=session if scope == "session" else None)


def _populate(store, w):
    for n, (agent, scope, user) in enumerate(w["facts"]):
        content = _tag(agent, scope, user, None, n)
        store.facts.insert_fact(Fact(
            fact_id=f"f{n}", agent_id=agent, scope=scope, user_id=user if scope == "user" else None,
            scope_key=_key(scope, user, None), content=content, hash=text_hash(content),
            embedding=EMB.embed([content]).vectors[0], embedding_model=EMB.model, formed_at=NOW - timedelta(hours=n),
        ))
    for n, (agent, scope, user, session) in enumerate(w["reflections"]):
        store.reflections.insert_reflections([Reflection(
            reflection_id=f"r{n}", agent_id=agent, scope=scope, user_id=user if scope == "user" else None,
            session_id=session if scope == "session" else None, scope_key=_key(scope, user, session),
            content=_tag(agent, scope, user, session, n), formed_at=NOW,
        )])
    for n, (agent, scope, user, session) in enumerate(w["blobs"]):
        store.blobs.save_blob(ConsolidatedBlob(
            agent_id=agent, scope=scope, scope_key=_key(scope, user, session),
            user_id=user if scope == "user" else None, session_id=session if scope == "session" else None,
            consolidated_content=_tag(agent, scope, user, session, 100 + n), word_limit=300, version=1,
        ), expected_version=0)
    for session, users in w["sessions"].items():
        for i, user in enumerate(sorted(users)):
            store.ingest.ingest_message(message(i + 1, session=session, agent="A", user=user, users=sorted(users)), T0)
    for agent in AGENTS:
        store.leases.bump_scope_versions(agent, ["agent", *(f"user:{u}" for u in USERS), *(f"session:{s}" for s in SESSIONS)])


def _allowed_owners(w, user, session):
    group = len(w["sessions"].get(session, set()) | {user}) > 1
    allowed = {"ownAagent", f"ownAsess{session}"}
    if not group:
        allowed.add(f"ownAuser{user}")
    return allowed, group


def _owners_in(text):
    return set(re.findall(r"own[AB](?:agent|user[UVW]|sesss\d)", text))


def _check(store, w):
    user, session = w["reader"]
    service = MemoryService("A", settings=Settings(_env_file=None, **OPEN), store=store, embedder=EMB,
                            clock=FrozenClock(NOW))
    allowed, group = _allowed_owners(w, user, session)
    xml = service.get_memory_context(session_id=session, user_id=user)
    assert _owners_in(xml) <= allowed, xml
    if group:
        assert "<UserMemory>" not in xml and "[user]" not in xml
    results = service.search_facts(["memory note", "item0 item1"], session_id=session, user_id=user, top_k=50)
    shown = _owners_in(" ".join(r["content"] for r in results))
    assert shown <= allowed & {"ownAagent", f"ownAuser{user}"}
    # the pre-filter must not hide what is visible: every allowed fact is found
    expected = {f"f{n}" for n, (agent, scope, u) in enumerate(w["facts"])
                if agent == "A" and (scope == "agent" or (u == user and not group))}
    assert {r["id"] for r in results} == expected


COMMON = dict(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(**COMMON)
@given(w=world)
def test_sqlite_search_and_context_never_cross_agents_users_or_group_chats(w):
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "m.db"))
        store.create_indexes()
        try:
            _populate(store, w)
            _check(store, w)
        finally:
            store.close()


@settings(**{**COMMON, "max_examples": 10})
@given(w=world)
def test_mongo_search_and_context_never_cross_agents_users_or_group_chats(w):
    store = MongoStore(emulated_database())
    store.create_indexes()
    _populate(store, w)
    _check(store, w)
