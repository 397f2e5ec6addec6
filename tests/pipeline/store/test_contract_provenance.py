"""The provenance queries of the store port (design §11 "Provenance and erasure"): they follow
every write that changes who an item rests on, on every adapter."""

from __future__ import annotations

from datetime import datetime, timezone

from pipeline.erasure import Plan
from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from schemas.documents import ConsolidatedBlob, Fact, Reflection, RejectedEvent, scope_key

NOW = datetime(2026, 5, 1, tzinfo=timezone.utc)


def _fact(fact_id, text, users, key="agent"):
    return Fact(fact_id=fact_id, agent_id="a1", scope="agent" if key == "agent" else "user",
                user_id=key.split(":", 1)[1] if key.startswith("user:") else None, scope_key=key, content=text,
                hash=text_hash(text), source_user_ids=users, formed_at=NOW)


def test_resting_on_follows_inserts_updates_and_deletes(store):
    store.facts.insert_fact(_fact("f1", "The venue is Quokka Hall", ["u1"]))
    store.facts.insert_fact(_fact("f2", "Ann likes tea", [], key=scope_key("user", user_id="u2")))
    store.facts.insert_fact(_fact("f3", "Door code 12", []))
    assert [f.fact_id for f in store.provenance.resting_on("u1").facts] == ["f1"]
    assert [f.fact_id for f in store.provenance.resting_on("u2").facts] == ["f2"]  # their own scope
    assert [f.fact_id for f in store.provenance.unattributed().facts] == ["f3"]

    # u2's correction UPDATEs u1's fact: it rests on both now
    assert store.facts.update_fact("f1", FactUpdate(
        content="The venue is Okapi Hall", hash=text_hash("okapi"), embedding=None, embedding_model=None,
        run_id="r2", now=NOW, source_message_ids=["m9"], source_user_ids=["u2"]))
    assert sorted(f.fact_id for f in store.provenance.resting_on("u2").facts) == ["f1", "f2"]
    assert store.provenance.set_item_sources("facts", "f3", ["u3"], ["m1"]) is True
    assert store.provenance.set_item_sources("facts", "f3", ["u4"], ["m2"]) is False  # only items without sources
    assert store.provenance.unattributed().facts == [] and [f.fact_id for f in store.provenance.resting_on("u3").facts] == ["f3"]
    assert store.provenance.footprint("u3").counts == {"facts.source_user_ids": 1}

    store.admin.erase_memory(Plan(fact_ids=["f1", "f3"]))
    assert store.provenance.resting_on("u1").facts == [] and store.provenance.footprint("u3").counts == {}


def test_footprint_names_every_place_and_nothing_of_another_user(store):
    store.reflections.insert_reflections([Reflection(reflection_id="r1", agent_id="a1", scope="agent", scope_key="agent",
                                         content="Bob runs the stream", source_user_ids=["u10"], formed_at=NOW)])
    store.ingest.record_rejection(RejectedEvent(rejection_id="x1", agent_id="a1", raw='{"message": {"sendr": "u1"}}',
                                         errors=[], received_at=NOW))
    store.ingest.record_rejection(RejectedEvent(rejection_id="x2", raw="not json from u1", errors=[], received_at=NOW))
    store.blobs.save_blob(ConsolidatedBlob(agent_id="a1", scope="agent", scope_key="agent", word_limit=1200, version=1,
                                     consolidated_content="VERSION: 1\n[SHARD]\n- v1 text"), 0)
    assert store.provenance.footprint("u1").counts == {"rejected.raw": 2}
    assert sorted(store.provenance.rejected_naming("u1", "a1")) == ["x1", "x2"]
    assert store.provenance.rejected_naming("u10") == []
    assert store.provenance.footprint("u10").counts == {"reflections.source_user_ids": 1}
    assert [b.scope_key for b in store.provenance.unexplained_blobs("a1")] == ["agent"]


def _reflection(rid, users, minute, absorbed=False, key="agent"):
    return Reflection(reflection_id=rid, agent_id="a1", scope="agent", scope_key=key, content=f"note {rid}",
                      source_user_ids=users, formed_at=NOW.replace(minute=minute), absorbed=absorbed)


def test_a_blob_scopes_reflection_ids_and_whether_it_took_anyone_elses_follow_absorption_and_deletes(store):
    store.reflections.insert_reflections([
        _reflection("r3", ["u1"], 3, absorbed=True), _reflection("r1", ["u1"], 1, absorbed=True),
        _reflection("r2", [], 2, absorbed=True),           # no source user: nobody else's
        _reflection("r4", ["u1", "u2"], 4),                # buffered: not in the blob yet
        _reflection("r5", ["u2"], 5, absorbed=True, key="session:s9"),
    ])
    assert store.provenance.reflection_ids("a1", "agent") == ["r1", "r2", "r3", "r4"]      # oldest first
    assert store.provenance.reflection_ids("a1", "agent", absorbed_only=True) == ["r1", "r2", "r3"]
    assert store.provenance.reflection_ids("a2", "agent") == [] and store.provenance.reflection_ids("a1", "user:u1") == []
    assert store.provenance.absorbed_from_others("a1", "agent", "u1") is False
    assert store.provenance.absorbed_from_others("a1", "agent", "u2") is True              # r1 and r3 are u1's
    assert store.provenance.absorbed_from_others("a1", "session:s9", "u1") is True

    assert store.reflections.mark_absorbed(["r4"], 2, NOW) == 1                             # u2 now shares the blob
    assert store.provenance.absorbed_from_others("a1", "agent", "u1") is True
    store.admin.erase_memory(Plan(reflection_ids=["r4"]))
    assert store.provenance.absorbed_from_others("a1", "agent", "u1") is False
    assert store.provenance.reflection_ids("a1", "agent", absorbed_only=True) == ["r1", "r2", "r3"]
