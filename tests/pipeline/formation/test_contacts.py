"""Contact data in shared scope: what counts, and where such an item goes instead."""

from __future__ import annotations

import pytest

from pipeline.formation.contacts import contact_kind
from schemas.documents import AgentSettings

from testkit.formation import ALICE_CHAT, facts, reflections

IDS = ["user-maya", "u-1"]


@pytest.mark.parametrize(("text", "kind"), [
    ("Reach Maya at maya.chen@lumen.example for venue questions", "email"),
    ("Maya's phone is 555-0142", "phone"),
    ("Maya's number is +351 912 345 678", "phone"),
    ("Whatsapp Tom on 912 345 678 for the crew meals", "phone"),
    ("(21) 555-0199 is Maya's direct line", "phone"),
    ("Ask user-maya before booking", "user_id"),
])
def test_contact_data_is_recognised(text, kind):
    assert contact_kind(text, IDS) == kind


@pytest.mark.parametrize("text", [
    "Tom handles the AV",                                  # a name is team knowledge
    "Maya Chen is the product manager",
    "Bookings go through events@venue.example",            # an organisation's role mailbox
    "The launch is on 2026-03-14 at 18.30",
    "Tom ran streams from 2019-2023",
    "The budget is 12,000 euros for 100 guests",
    "Order number 12345678 ships on Monday",
    "Version 1.2.3 fixes the stream",
    "Maya's user-mayan alias is taken",                    # an id is a whole token
])
def test_names_dates_and_amounts_are_not_contact_data(text):
    assert contact_kind(text, IDS) is None


def test_ids_under_three_characters_are_not_looked_for():
    assert contact_kind("The u1 prototype ships in May", ["u1"]) is None


CONTACT = "The caterer should call Alice on 555-0142"
SHARED = "The venue is Riverside Park"


def _rows(env, collection):
    dump = env.store.admin.dump_all()
    return next(rows for name, rows in dump.items() if name.endswith(collection))


def test_one_to_one_moves_agent_contact_data_to_the_speakers_scope(env):
    env.llm.on("extract_facts", facts(("agent", CONTACT), ("agent", SHARED)))
    env.llm.on("extract_reflections", reflections(agent=["Send Alice the menu at alice@example.com"]))
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    assert sorted((f.scope_key, f.content) for f in env.live_facts()) == [
        ("agent", SHARED), ("user:u-1", CONTACT)]
    assert [(r["scope_key"], r["content"]) for r in _rows(env, "reflections")] == [
        ("user:u-1", "Send Alice the menu at alice@example.com")]
    totals = env.store.runs.get_run(run_id).totals
    assert (totals["contacts_rescoped"], totals["contacts_dropped"]) == (2, 0)


def test_group_chat_drops_agent_contact_data(env):
    group = [("user", "u-1", "Hi, I'm Alice."), ("user", "u-2", "I'm Bob."), ("assistant", None, "Welcome.")]
    env.llm.on("extract_facts", facts(("agent", "Bob's mobile is +44 7700 900123"), ("agent", SHARED),
                                      ("agent", "Tom handles the AV")))
    env.llm.on("extract_reflections", reflections(agent=["Ping u-2 before changing the schedule"],
                                                  session=["Bob will bring the projector"]))
    run_id = env.new_run(group, users=("u-1", "u-2"))
    env.whole_chain(run_id)
    assert sorted(f.content for f in env.live_facts()) == [SHARED, "Tom handles the AV"]
    assert [r["content"] for r in _rows(env, "reflections")] == ["Bob will bring the projector"]
    totals = env.store.runs.get_run(run_id).totals
    assert (totals["contacts_rescoped"], totals["contacts_dropped"]) == (0, 2)


def test_user_memory_off_drops_instead_of_rescoping(env):
    env.store.ingest.put_agent_settings(AgentSettings(agent_id="agent-1", user_memory_enabled=False))
    env.llm.on("extract_facts", facts(("agent", CONTACT), ("agent", SHARED)))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    assert [(f.scope_key, f.content) for f in env.live_facts()] == [("agent", SHARED)]
    assert env.store.runs.get_run(run_id).totals["contacts_dropped"] == 1


def test_a_user_scope_fact_keeps_its_contact_data(env):
    env.llm.on("extract_facts", facts(("user", "Alice's email is alice@example.com")))
    env.llm.on("extract_reflections", reflections())
    run_id = env.new_run(ALICE_CHAT)
    env.whole_chain(run_id)
    assert [(f.scope_key, f.content) for f in env.live_facts()] == [("user:u-1", "Alice's email is alice@example.com")]
    totals = env.store.runs.get_run(run_id).totals
    assert (totals["contacts_rescoped"], totals["contacts_dropped"]) == (0, 0)
