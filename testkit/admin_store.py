"""A store of any size for the per-user operations (design §11 "Provenance and erasure"): many
users and agents, with messages, runs, sessions, reflections and facts in proportion, plus one
probed user of a fixed size (``PROBE``) whose data is the same at every scale.

``bulk_documents`` builds the other users' documents (``bulk_chunks`` the same a few thousand
users at a time, so that a million-fact store is never whole in memory); ``write_bulk`` writes
them straight into the collections or tables, on SQLite in one transaction (the per-document
store calls would make the build, not the operations, the cost); ``add_probe`` forms the
probed user's data through the store's own calls (ingest, runs, inserts), with a group chat
shared with another user.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta, timezone

from pipeline.ingest import ingest_raw_event
from pipeline.text import text_hash
from schemas.documents import (
    CachedContext, ConsolidatedBlob, Fact, FormationRun, Reflection, SessionState, StageRecord, StoredMessage, scope_key,
)

PROBE, PEER = "user-probe", "u0"
T0 = datetime(2026, 5, 1, tzinfo=timezone.utc)
#: facts per other user; the probed user has ``PROBE_FACTS`` at every scale
FACTS_PER_USER = 10
PROBE_FACTS = 20
#: users per chunk of ``bulk_chunks``: about 20k facts, 40k messages (some 100 MB as models)
CHUNK_USERS = 2_000


def bulk_documents(facts: int, agents: int = 100) -> dict[str, list]:
    """Models of the other users' data: ``facts`` facts over ``facts // FACTS_PER_USER`` users
    and ``agents`` agents, two messages, a fifth of a run and of a reflection per fact."""
    return user_documents(range(max(1, facts // FACTS_PER_USER)), agents)


def bulk_chunks(facts: int, agents: int = 100) -> Iterator[dict[str, list]]:
    """``bulk_documents(facts, agents)`` in chunks of ``CHUNK_USERS`` users."""
    users = max(1, facts // FACTS_PER_USER)
    for first in range(0, users, CHUNK_USERS):
        yield user_documents(range(first, min(first + CHUNK_USERS, users)), agents)


def user_documents(users: range, agents: int = 100) -> dict[str, list]:
    """The documents of users ``u{i}`` for i in ``users`` (user i in agent ``a{i % agents}``)."""
    out: dict[str, list] = {"facts": [], "messages": [], "runs": [], "sessions": [], "reflections": [],
                            "contexts": []}
    for u in users:
        user, agent, session = f"u{u}", f"a{u % agents}", f"s-u{u}"
        out["sessions"].append(SessionState(session_id=session, agent_id=agent, last_seq=2 * FACTS_PER_USER,
                                            claimed_through=2 * FACTS_PER_USER, watermark=2 * FACTS_PER_USER,
                                            users=[user], last_activity_at=T0))
        for i in range(2 * FACTS_PER_USER):
            out["messages"].append(StoredMessage(
                agent_id=agent, session_id=session, message_id=f"m{i}", event_id=f"e-{user}-{i}", seq=i + 1,
                role="user", sender_id=user, content=f"{user} says note {i}", created_at=T0 + timedelta(minutes=i),
                ingested_at=T0, session_users=[user]))
        out["contexts"].append(CachedContext(session_id=session, user_id=user, agent_id=agent,
                                             xml=f"<MemoryContext>{user}</MemoryContext>", built_at=T0))
        run = FormationRun(run_id=f"run-{user}", agent_id=agent, session_id=session, seq_from=1,
                           seq_to=2 * FACTS_PER_USER, reason="threshold", status="done", created_at=T0,
                           user_ids=[user])
        out["runs"].append(run)
        for i in range(FACTS_PER_USER):
            scope = "user" if i % 2 else "agent"
            key = scope_key("user", user_id=user) if scope == "user" else "agent"
            text = f"{user} fact number {i}"
            out["facts"].append(Fact(
                fact_id=f"f-{user}-{i}", agent_id=agent, scope=scope, user_id=user if scope == "user" else None,
                scope_key=key, content=text, hash=text_hash(text), source_session_id=session,
                source_message_ids=[f"m{2 * i}"], source_user_ids=[user], source_run_id=run.run_id, formed_at=T0))
        for i in range(FACTS_PER_USER // 5):
            out["reflections"].append(Reflection(
                reflection_id=f"run-{user}:user:{i}", agent_id=agent, scope="user", user_id=user,
                scope_key=scope_key("user", user_id=user), content=f"{user} likes tea {i}",
                source_session_id=session, source_message_ids=[f"m{i}"], source_user_ids=[user],
                source_run_id=run.run_id, formed_at=T0))
    return out


def write_bulk(store, docs: dict[str, list] | Iterable[dict[str, list]]) -> None:
    """Write ``bulk_documents`` (or each of ``bulk_chunks``) straight into the store's
    collections or tables; on SQLite every chunk in one transaction."""
    from pipeline.store.mongo import MongoStore

    chunks = [docs] if isinstance(docs, dict) else docs
    if isinstance(store, MongoStore):
        for chunk in chunks:
            _write_mongo(store, chunk)
        return
    with store.db.write() as conn:
        # the index b-trees of a million-fact build outgrow SQLite's default 2 MB page cache,
        # and every insert then rereads pages it just wrote (the build slowed down as it grew)
        conn.execute("PRAGMA cache_size=-262144")
        for chunk in chunks:
            _write_sqlite(store, conn, chunk)


def _write_mongo(store, docs) -> None:
    from pipeline.store.mongo.codec import escape_keys, to_doc
    from pipeline.store.mongo.facts import LIVE, SEARCH_TEXT

    def raw(name):
        col = store.col(name)
        return getattr(col, "_collection", col)  # the emulation's unlocked collection: one bulk write

    raw("facts").insert_many([{**to_doc(f, f.fact_id), LIVE: True, SEARCH_TEXT: f.search_text} for f in docs["facts"]])
    raw("messages").insert_many([to_doc(m) for m in docs["messages"]])
    raw("runs").insert_many([escape_keys(to_doc(r, r.run_id)) for r in docs["runs"]])
    raw("sessions").insert_many([to_doc(s, s.session_id) for s in docs["sessions"]])
    raw("reflections").insert_many([to_doc(r, r.reflection_id) for r in docs["reflections"]])
    raw("contexts").insert_many([{**to_doc(c), "versions": []} for c in docs["contexts"]])


def _write_sqlite(store, conn, docs) -> None:
    from pipeline.store._common import ts

    t = store.db.t
    conn.executemany(
        f"INSERT INTO {t('facts')} (fact_id, agent_id, scope_key, hash, scope, user_id, content, embedding, "
        "embedding_model, formed_at, retired_at, doc, updated_at, search_text) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, NULL, ?, ?, ?)",
        [(f.fact_id, f.agent_id, f.scope_key, f.hash, f.scope, f.user_id, f.content, ts(f.formed_at),
          f.model_dump_json(exclude={"embedding"}), ts(f.updated_at), f.search_text) for f in docs["facts"]])
    conn.executemany(
        f"INSERT INTO {t('messages')} (event_id, session_id, message_id, agent_id, seq, sender_id, created_at, doc) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(m.event_id, m.session_id, m.message_id, m.agent_id, m.seq, m.sender_id, ts(m.created_at),
          m.model_dump_json()) for m in docs["messages"]])
    conn.executemany(
        f"INSERT INTO {t('runs')} (run_id, agent_id, session_id, status, lease_expires_at, created_at, doc) "
        "VALUES (?, ?, ?, ?, NULL, ?, ?)",
        [(r.run_id, r.agent_id, r.session_id, r.status, ts(r.created_at), r.model_dump_json())
         for r in docs["runs"]])
    conn.executemany(
        f"INSERT INTO {t('sessions')} (session_id, agent_id, last_activity_at, unclaimed, active_run_id, doc) "
        "VALUES (?, ?, ?, 0, NULL, ?)",
        [(s.session_id, s.agent_id, ts(s.last_activity_at), s.model_dump_json()) for s in docs["sessions"]])
    conn.executemany(
        f"INSERT INTO {t('reflections')} (reflection_id, agent_id, scope_key, absorbed, formed_at, doc) "
        "VALUES (?, ?, ?, 0, ?, ?)",
        [(r.reflection_id, r.agent_id, r.scope_key, ts(r.formed_at), r.model_dump_json())
         for r in docs["reflections"]])
    conn.executemany(f"INSERT INTO {t('contexts')} (session_id, user_id, doc) VALUES (?, ?, ?)",
                     [(c.session_id, c.user_id, c.model_dump_json()) for c in docs["contexts"]])


def add_probe(store, settings, clock, agent_id: str = "a1") -> str:
    """The probed user's data, the same at every scale: a one-to-one session and a group chat
    with ``PEER`` (messages through ingest, each closed into a run with a priced stage),
    ``PROBE_FACTS`` facts in their scope and the agent's, an agent reflection of each speaker
    absorbed into the agent blob. Returns the group session id."""
    events = []
    for session, users in (("s-probe", [PROBE]), ("s-probe-group", [PROBE, PEER])):
        for i, user in enumerate([*users, *users]):
            events.append({"type": "message.added", "event_id": f"{session}-{i}", "agent_id": agent_id,
                           "session_id": session, "session_users": users,
                           "message": {"message_id": f"{session}-m{i}", "role": "user", "sender_id": user,
                                       "content": f"{user} message {i} in {session}",
                                       "created_at": clock.now().isoformat()}})
        events.append({"type": "session.ended", "event_id": f"{session}-end", "agent_id": agent_id,
                       "session_id": session})
    runs = []
    for raw in events:
        result = ingest_raw_event(raw, store, settings, clock)
        if result.run is not None:
            runs.append(result.run)
    now = clock.now()
    for run in runs:  # a priced stage on each run: its cost must survive the erasure
        store.runs.start_stage(run.run_id, "extract_facts", now)
        store.runs.complete_stage(run.run_id, "extract_facts", StageRecord(
            status="done", output={"facts": []}, started_at=now, finished_at=now, duration_ms=1.0,
            usage={"calls": 1, "input_tokens": 100, "output_tokens": 10, "by_model": {
                "gpt-5-mini": {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 100,
                               "output_tokens": 10}}}))
    group_run = runs[-1].run_id
    for i in range(PROBE_FACTS):
        scope = "user" if i % 2 else "agent"
        text = f"{PROBE} detail number {i}"
        store.facts.insert_fact(Fact(
            fact_id=f"f-probe-{i}", agent_id=agent_id, scope=scope, user_id=PROBE if scope == "user" else None,
            scope_key=scope_key("user", user_id=PROBE) if scope == "user" else "agent", content=text,
            hash=text_hash(text), source_session_id="s-probe", source_message_ids=["s-probe-m0"],
            source_user_ids=[PROBE], source_run_id=runs[0].run_id, formed_at=now))
    store.reflections.insert_reflections([
        Reflection(reflection_id=f"{group_run}:agent:{i}", agent_id=agent_id, scope="agent", scope_key="agent",
                   content=text, source_session_id="s-probe-group", source_message_ids=[mid],
                   source_user_ids=[user], source_run_id=group_run, formed_at=now)
        for i, (user, mid, text) in enumerate(((PROBE, "s-probe-group-m0", "The probe wants Tuesday launches"),
                                               (PEER, "s-probe-group-m1", "The peer runs the live stream")))])
    ids = [f"{group_run}:agent:0", f"{group_run}:agent:1"]
    store.blobs.save_blob(ConsolidatedBlob(
        agent_id=agent_id, scope="agent", scope_key="agent", word_limit=1200, version=1, last_run_id=group_run,
        absorbing_ids=ids, consolidated_content="VERSION: 1\n[PROJECTS]\n- The probe wants Tuesday launches\n"
                                                "- The peer runs the live stream"), 0)
    store.reflections.mark_absorbed(ids, 1, now)
    return "s-probe-group"

