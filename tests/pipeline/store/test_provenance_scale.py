"""Per-user operations on a 3k-fact store (design §11 "Provenance and erasure"): export, erasure,
verification and cost behave, and no query they make reads the store: on MongoDB none examines
more than 10 × (matched + 10) documents; on SQLite none is planned as a scan of a table that
grows with the store (SQLite's own planner, ``EXPLAIN QUERY PLAN``). The missing-index detector.

Why the detector counts documents examined rather than checking filters against declared
index prefixes: a prefix check passes a query served by an index whose prefix is only
``agent_id`` (it reads every document of the agent), and cannot see a query whose filter is
built at run time; counting what a query examines on a store where the user is small and the
rest is large fails exactly when the work grows with the store, whatever the reason.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from testkit.admin_store import PEER, PROBE, T0, add_probe, bulk_documents, user_documents, write_bulk
from usecases.cost import cost_report
from pipeline.clock import FrozenClock
from pipeline.export import export_user
from pipeline.forgetting import forget_user, verify_erasure
from pipeline.llm.offline import OfflineLLM
from pipeline.store import open_store
from pipeline.store.mongo import MongoStore
from schemas.documents import Reflection
from schemas.settings import Settings
from testkit.mongo_emulation import emulated_database
from testkit.mongo_explain import EXPLAIN

#: a store where a scan shows: a query reading every fact examines ~3,000 documents, ten times
#: what the detector lets the probe's queries examine (as ``DETECTOR_FACTS`` shows at 2,000);
#: 10,000 proved no more and loaded for 30 s on the Mongo emulation
FACTS = 3_000


@pytest.fixture(scope="module")
def bulk():
    return bulk_documents(FACTS)


def _store(kind: str, tmp_path, bulk, settings):
    store = open_store(settings) if kind == "sqlite" else MongoStore(emulated_database())
    write_bulk(store, bulk)
    store.create_indexes()
    add_probe(store, settings, FrozenClock())
    return store


def _operations(store, settings) -> dict:
    """Export, forget, verify, export again, and the agent's cost, for the probed user."""
    records = list(export_user(store, PROBE))
    cost_before = cost_report(store, "a1")["total"]["by_model"]["gpt-5-mini"]["input_tokens"]
    result = forget_user(store, PROBE, settings=settings, llm=OfflineLLM(settings))
    check = verify_erasure(store, PROBE, blob_keys=result.blob_keys)
    return {"records": records, "result": result, "check": check, "after": list(export_user(store, PROBE)),
            "cost_before": cost_before,
            "cost_after": cost_report(store, "a1")["total"]["by_model"]["gpt-5-mini"]["input_tokens"]}


def _behaves(store, out) -> None:
    kinds = {r["kind"] for r in out["records"]}
    assert {"message", "fact", "reflection", "blob_section", "run_cost"} <= kinds
    assert sum(r["kind"] == "fact" for r in out["records"]) == 20
    assert out["result"].counts["facts"] == 10 and out["result"].counts["facts_by_source"] == 10
    assert out["check"].passed(strict=True), out["check"]
    assert out["after"] == []
    assert out["cost_after"] >= out["cost_before"] > 0
    blob = store.blobs.get_blob("a1", "agent").consolidated_content
    assert "live stream" in blob and "Tuesday" not in blob
    assert [r.source_user_ids for r in store.reflections.list_reflections("a1", "agent")] == [[PEER]]


#: tables whose size follows the store (the leases, the agents and usage per agent do not)
GROWING = ("facts", "reflections", "consolidated", "messages", "sessions", "runs", "contexts", "rejected",
           "scope_versions", "user_refs")


def _scans(store, statements: list[str]) -> list[str]:
    """The statements SQLite plans as a full scan of a growing table."""
    conn, found = store.db.conn(), []
    for sql in dict.fromkeys(statements):
        if not sql.lstrip().upper().startswith(("SELECT", "DELETE", "UPDATE")):
            continue
        for *_, detail in conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall():
            table = detail.split()[1].strip('"') if detail.startswith(("SCAN ", "SEARCH ")) else ""
            scan = detail.startswith("SCAN ") and any(table == f"{store.db.prefix}{n}" for n in GROWING)
            # the refs of one kind are as many as the store's items: a lookup must name the user
            unbound = table == f"{store.db.prefix}user_refs" and "user_id=" not in detail
            if scan or unbound:
                found.append(f"{detail}: {sql[:300]}")
    return found


def test_export_forget_and_verify_at_10k_touch_only_the_user_and_keep_everyone_else(tmp_path, bulk):
    settings = Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}")
    store = _store("sqlite", tmp_path, bulk, settings)
    before = len(store.facts.list_facts("a0"))
    statements: list[str] = []
    store.db.conn().set_trace_callback(statements.append)
    try:
        out = _operations(store, settings)
    finally:
        store.db.conn().set_trace_callback(None)
    _behaves(store, out)
    assert len(store.facts.list_facts("a0")) == before
    assert len(statements) > 20
    assert _scans(store, statements) == []
    store.close()


def test_the_sqlite_check_sees_a_scan(tmp_path):
    store = open_store(Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}"))
    scan = f"SELECT doc FROM {store.db.t('facts')} WHERE json_extract(doc, '$.source_user_ids') LIKE '%u1%'"
    assert _scans(store, [scan, f"SELECT doc FROM {store.db.t('facts')} WHERE fact_id = 'f'"]) == [
        f"SCAN {store.db.prefix}facts: {scan}"]
    store.close()


def _costly(store, settings) -> tuple[dict, list[str]]:
    EXPLAIN.queries.clear()
    EXPLAIN.on = True
    try:
        out = _operations(store, settings)
    finally:
        EXPLAIN.on = False
    assert len(EXPLAIN.queries) > 20  # the recorder saw the operations
    return out, [f"{q.collection}.{q.operation}({q.filter}) {q.plan}: examined {q.examined}, matched {q.returned}"
                 for q in EXPLAIN.queries if q.too_costly()]


def test_on_mongo_no_query_of_the_per_user_operations_examines_the_store(tmp_path, bulk):
    settings = Settings(store_url=f"sqlite:///{tmp_path / 'unused.db'}")
    store = _store("mongo", tmp_path, bulk, settings)
    assert store.col("facts").count_documents({}) > FACTS
    out, costly = _costly(store, settings)
    assert costly == []
    _behaves(store, out)


#: enough for the detector: without its index, the probe's query reads every fact, ~2,000, far
#: past the 10 x (its 10-20 matches + 10) = 300 at most it may examine; more would only load longer
DETECTOR_FACTS = 2_000


def test_the_detector_fails_when_an_index_is_missing(tmp_path):
    settings = Settings(store_url=f"sqlite:///{tmp_path / 'unused.db'}")
    store = _store("mongo", tmp_path, bulk_documents(DETECTOR_FACTS), settings)
    store.col("facts").drop_index("source_users")
    _, costly = _costly(store, settings)
    assert costly and all(line.startswith("memory2_facts.") for line in costly), costly
    assert any("source_user_ids" in line and "COLLSCAN" in line for line in costly)


# ------------------------------------------------------- a person's memory, listed -------
# The listings a person or an operator asks for about one user (``GET /v1/users/.../memory``
# and the inspector's "my memory", ``memoryctl memory``) show the agent-scope items resting on
# that user. Every query they make is indexed even when they read a whole agent scope and
# filter it, so the per-query detector above cannot see that; what can is the work of the
# whole listing staying flat when the rest of the agent doubles.
AGENT_USERS = 60


def _others(users: range) -> dict:
    """Other users of one agent, ``a0``, each with an agent-scope reflection too."""
    docs = user_documents(users, agents=1)
    docs["reflections"] += [Reflection(
        reflection_id=f"run-u{u}:agent:0", agent_id="a0", scope="agent", scope_key="agent",
        content=f"u{u} brings the slides", source_session_id=f"s-u{u}", source_message_ids=["m0"],
        source_user_ids=[f"u{u}"], source_run_id=f"run-u{u}", formed_at=T0) for u in users]
    return docs


def _listings(store) -> dict:
    from api.user_memory import list_memory
    from ops.commands.memory import person_memory

    mine = list_memory(store, "a0", PROBE, FrozenClock().now())
    now, then = FrozenClock().now(), FrozenClock().now() + timedelta(days=1)
    view, as_of = (person_memory(store, "a0", PROBE, None, when, then) for when in (None, then))
    return {"api": (len(mine.facts), len(mine.shared_facts), [r.content for r in mine.shared_reflections]),
            "memoryctl": [(len(v["shared"]["facts"]), [r["content"] for r in v["shared"]["reflections"]],
                           len(v["scopes"][0]["facts"])) for v in (view, as_of)]}


def _work(kind: str, store, step) -> tuple[object, int]:
    """``step()`` and its work: documents examined on MongoDB, tens of virtual-machine
    instructions on SQLite (``set_progress_handler`` calls the counter every 10)."""
    if kind == "mongo":
        EXPLAIN.queries.clear()
        EXPLAIN.on = True
        try:
            out = step()
        finally:
            EXPLAIN.on = False
        return out, sum(q.examined for q in EXPLAIN.queries)
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0

    store.db.conn().set_progress_handler(tick, 10)
    try:
        out = step()
    finally:
        store.db.conn().set_progress_handler(None, 10)
    return out, ticks[0]


@pytest.mark.parametrize("kind", ["sqlite", "mongo"])
def test_listing_a_persons_memory_costs_the_same_when_the_rest_of_the_agent_doubles(kind, tmp_path):
    expected = {"api": (10, 10, ["The probe wants Tuesday launches"]),
                "memoryctl": [(10, ["The probe wants Tuesday launches"], 10)] * 2}
    work = []
    for users in (AGENT_USERS, 2 * AGENT_USERS):  # two stores: the emulation's inserts slow down once indexed
        settings = Settings(store_url=f"sqlite:///{tmp_path / f'memory-{users}.db'}")
        store = open_store(settings) if kind == "sqlite" else MongoStore(emulated_database())
        write_bulk(store, _others(range(users)))
        store.create_indexes()
        add_probe(store, settings, FrozenClock(), agent_id="a0")
        assert len(store.facts.list_facts("a0", "agent")) == users * 5 + 10
        out, done = _work(kind, store, lambda: _listings(store))
        assert out == expected
        work.append(done)
        store.close()
    before, after = work
    assert before > 0 and after <= 1.2 * before, f"{before} -> {after}"
