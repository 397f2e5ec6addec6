"""What a person changes by hand, and what an import writes, reaches the agent's webhooks as
formation's changes do (design §13 "Operator controls"): the same kinds and ``data``, no
content, and who made it (``source``) where a run's event names the run. Each over a real
subscription on SQLite and on the strict Mongo emulation, delivered to a real receiver that
verifies every signature."""

from __future__ import annotations

import json

import pytest

from api import user_memory
from schemas.documents import scope_key
from testkit.documents import fact
from testkit.formation import make_atlas_env, make_env
from testkit.webhook_receiver import Receiver
from tests.pipeline.webhooks.test_webhook_outbox import send_due, subscribe
from usecases import edit
from usecases.imports import import_file
from usecases.withdraw import WithdrawIn, withdraw
from usecases.writes import FactWrite, ReflectionWrite, add_fact, add_reflection

KINDS = ("fact.created", "fact.updated", "fact.retired", "memory.consolidated")


@pytest.fixture(params=["sqlite", "mongo"])
def env(request, tmp_path):
    e = make_env(tmp_path) if request.param == "sqlite" else make_atlas_env(tmp_path)
    yield e
    e.store.close()


@pytest.fixture
def receiver(env):
    r = Receiver().start()
    subscribe(env, r, events=KINDS)
    yield r
    r.stop()


def delivered(env, receiver) -> list[tuple[str, dict]]:
    """Send what is due; the (kind, data less the agent) of each delivery the receiver verified,
    in a stable order (the deliveries of one instant are sent in any order), then forget them."""
    assert {d.outcome for d in send_due(env)} <= {"delivered"}
    assert all(r.verified and r.payload["data"].pop("agent_id") == "agent-1" for r in receiver.received)
    got = [(r.payload["type"], r.payload["data"]) for r in receiver.accepted()]
    receiver.received.clear()
    return ordered(got)


def ordered(events: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    return sorted(events, key=lambda e: json.dumps(e, sort_keys=True))


def test_a_direct_write_announces_its_fact_as_formation_does_and_its_reflection_not_before_a_merge(env, receiver):
    written = add_fact(env, FactWrite("agent-1", "The venue has a roof terrace", "owner"))
    add_reflection(env, ReflectionWrite("agent-1", "The team likes short recaps", "owner"))
    mine = add_fact(env, FactWrite("agent-1", "Maya prefers tea", "user", user_id="u-1"))
    assert delivered(env, receiver) == ordered([
        ("fact.created", {"fact_id": written.fact_id, "scope": "agent", "version": 1, "source": "owner"}),
        ("fact.created", {"fact_id": mine.fact_id, "scope": "user", "version": 1, "source": "user"}),
    ])


def written_and_told(env, receiver, shared_text: str, user_text: str):
    """An owner's agent fact and u-1's own fact, their creation delivered already."""
    shared = add_fact(env, FactWrite("agent-1", shared_text, "owner"))
    mine = add_fact(env, FactWrite("agent-1", user_text, "user", user_id="u-1"))
    delivered(env, receiver)
    return shared, mine


def test_an_owner_edit_and_a_user_edit_are_updates_naming_who_made_them(env, receiver):
    shared, mine = written_and_told(env, receiver, "The venue is Riverside Park", "Maya lives in Porto")
    env.clock.advance(seconds=60)
    assert edit.edit_agent_fact(env, shared, "The venue is Riverside Park, hall B") is not None
    user_memory.edit_fact(env, "agent-1", "u-1", mine.fact_id, "Maya lives in Lisbon")
    assert delivered(env, receiver) == ordered([
        ("fact.updated", {"fact_id": shared.fact_id, "scope": "agent", "version": 2, "source": "owner"}),
        ("fact.updated", {"fact_id": mine.fact_id, "scope": "user", "version": 2, "source": "user"}),
    ])


def test_a_correction_of_metadata_alone_is_an_update_naming_who_made_it(env, receiver):
    env.store.ingest.put_agent_settings(env.store.ingest.get_agent_settings("agent-1").model_copy(
        update={"metadata_keys": ["project"]}))
    shared, mine = written_and_told(env, receiver, "The venue is Riverside Park", "Maya lives in Porto")
    assert edit.edit_agent_fact(env, shared, shared.content, metadata={"project": "zeus"}) is not None
    user_memory.edit_fact(env, "agent-1", "u-1", mine.fact_id, mine.content, metadata={"project": "hera"})
    assert delivered(env, receiver) == ordered([
        ("fact.updated", {"fact_id": shared.fact_id, "scope": "agent", "version": 2, "source": "owner"}),
        ("fact.updated", {"fact_id": mine.fact_id, "scope": "user", "version": 2, "source": "user"}),
    ])


def test_a_deleted_fact_is_retired_with_the_reason_deleted_and_its_content_is_gone(env, receiver):
    shared, mine = written_and_told(env, receiver, "The budget is 12,000 euros", "Maya's dog is called Rex")
    env.store.webhooks.put_subscription(env.store.webhooks.list_subscriptions("agent-1")[0].model_copy(
        update={"include_content": True}))
    edit.delete_agent_item(env, shared, holder="test")
    user_memory.delete_item(env, "agent-1", "u-1", "fact", mine.fact_id, holder="test")
    send_due(env)
    got = [(r.payload["type"], r.payload["data"]) for r in receiver.accepted()]
    assert sorted((kind, data["fact_id"], data["reason"], data["source"]) for kind, data in got) == sorted([
        ("fact.retired", shared.fact_id, "deleted", "owner"), ("fact.retired", mine.fact_id, "deleted", "user")])
    # opted-in content is read when sent: a deleted fact has none to send
    assert all("content" not in data and data["content_withheld"] == "gone" for _, data in got)


def test_a_blob_edited_or_replaced_by_hand_announces_its_new_version(env, receiver):
    now = env.clock.now()
    edit.edit_section(env.store, env.settings, "agent-1", "agent", "venue", ["The venue is Riverside Park"],
                      by="owner-key", now=now, subject="agent")
    edit.replace_user_blob(env.store, env.settings, "agent-1", "u-1", "- Maya prefers tea", by="owner-key", now=now)
    edit.edit_section(env.store, env.settings, "agent-1", scope_key("user", user_id="u-1"), "drinks",
                      ["Maya prefers green tea"], by="u-1", now=now, subject="u-1", people=["u-1"], source="user")
    assert delivered(env, receiver) == ordered([
        ("memory.consolidated", {"scope": "agent", "scope_key": "agent", "version": 1, "run_id": None,
                                 "source": "owner"}),
        ("memory.consolidated", {"scope": "user", "scope_key": "user:u-1", "version": 1, "run_id": None,
                                 "source": "owner"}),
        ("memory.consolidated", {"scope": "user", "scope_key": "user:u-1", "version": 2, "run_id": None,
                                 "source": "user"}),
    ])


def test_an_import_announces_each_line_it_writes_once(env, receiver):
    lines = [{"user_id": "u-1", "text": "Ana renews in June"}, {"user_id": "u-2", "text": "Bo pays by invoice"},
             {"kind": "blob", "agent_id": "agent-1", "scope_key": "agent", "user_id": "u-1",
              "content": "## venue\n- The venue is Riverside Park"}]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    import_file(env, [body], "agent-1", by="test")
    got = delivered(env, receiver)
    stored = {f.fact_id for u in ("u-1", "u-2") for f in env.store.facts.list_facts("agent-1", f"user:{u}")}
    assert [kind for kind, _ in got] == ["fact.created", "fact.created", "memory.consolidated"]
    assert {data["fact_id"] for kind, data in got if kind == "fact.created"} == stored
    assert {data["source"] for _, data in got} == {"import"}
    import_file(env, [body], "agent-1", by="test")   # nothing new written: nothing announced
    assert delivered(env, receiver) == []


def test_a_withdrawal_is_an_update_by_the_user_and_about_them_too(env, receiver):
    shared = fact("f-crew", "The Mars crew is six", agent="agent-1").model_copy(
        update={"source_user_ids": ["u-1", "u-2"], "source_run_id": "edit:owner"})  # its text by an edit
    env.store.facts.insert_fact(shared)
    withdraw(env.store, WithdrawIn(agent_id="agent-1", user_id="u-1", kind="fact", item_id="f-crew",
                                   now=env.clock.now()))
    [queued] = env.store.webhooks.list_deliveries(agent_id="agent-1")
    assert sorted(queued.event.subjects) == ["u-1", "u-2"]
    assert delivered(env, receiver) == ordered([
        ("fact.updated", {"fact_id": "f-crew", "scope": "agent", "version": 1, "source": "user",
                          "reason": "withdrawn"})])


def test_an_import_line_newer_than_its_keys_fact_announces_an_update(env, receiver):
    row = {"user_id": "u-1", "text": "Ana renews in June", "import_key": "crm-1"}
    import_file(env, [(json.dumps(row) + "\n").encode()], "agent-1", by="test")
    [(_, created)] = delivered(env, receiver)
    import_file(env, [(json.dumps({**row, "text": "Ana renews in July"}) + "\n").encode()], "agent-1", by="test")
    assert delivered(env, receiver) == [("fact.updated", {**created, "version": 2})]


def test_an_import_line_whose_metadata_alone_differs_announces_an_update(env, receiver):
    env.store.ingest.put_agent_settings(env.store.ingest.get_agent_settings("agent-1").model_copy(
        update={"metadata_keys": ["project"]}))
    row = {"user_id": "u-1", "text": "Ana renews in June", "import_key": "crm-1", "metadata": {"project": "apollo"}}
    import_file(env, [(json.dumps(row) + "\n").encode()], "agent-1", by="test")
    [(_, created)] = delivered(env, receiver)
    changed = {**row, "metadata": {"project": "zeus"}}
    import_file(env, [(json.dumps(changed) + "\n").encode()], "agent-1", by="test")
    assert delivered(env, receiver) == [("fact.updated", {**created, "version": 2})]
    assert env.store.facts.labelled_fact_ids("agent-1", ["user:u-1"], [['meta:project="zeus"']]) == {
        created["fact_id"]}
