"""Event metadata from publish to facts (design §13 "Categories and metadata"): the producer's
events go through the real ingest, formation runs the real stages with the offline rules
provider, on SQLite and on the Mongo store over the Atlas emulation."""

from __future__ import annotations

import json

import pytest

from pipeline.formation import stages
from pipeline.ingest import ingest_raw_events
from pipeline.llm.offline import OfflineLLM
from testkit.formation import make_atlas_env, make_env
from usecases import metadata_keys
from usecases.erase import forget_user
from workers.producer import message_event

ALICE, BOB = "u-1", "u-2"
#: a value that is the person's, and said nowhere in the conversation's text
CRM_EMAIL = "alice.w@crm.example"


@pytest.fixture(params=["sqlite", "mongo"])
def env(request, tmp_path):
    e = make_env(tmp_path) if request.param == "sqlite" else make_atlas_env(tmp_path)
    e.llm = OfflineLLM(e.settings)
    yield e
    e.store.close()


def _publish(env, session: str, said: list[tuple[str | None, str, dict]]) -> None:
    """Messages as a producer publishes them, ingested as the worker ingests them."""
    events = []
    for sender, text, metadata in said:
        env.clock.advance(seconds=1)
        env.counter["msg"] += 1
        events.append(message_event(
            agent_id="agent-1", session_id=session, role="user" if sender else "assistant", sender_id=sender,
            content=text, message_id=f"m{env.counter['msg']}", created_at=env.clock.now(), metadata=metadata,
            session_users=[s for s, _, _ in said if s][:1]))
    batch = ingest_raw_events(events, env.store, env.settings, env.clock)
    assert {r.status for r in batch.results} == {"accepted"}, batch


def _form(env, session: str) -> None:
    run_id = env.claim(session)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        assert stage(run_id, env) is not None


def _kept(env) -> dict[str, dict]:
    return {f.content: f.metadata for f in env.live_facts()}


def _mark(env, *keys: str) -> None:
    metadata_keys.set_keys(env.store.ingest, "agent-1", list(keys), now=env.clock.now())


def test_a_fact_keeps_the_marked_keys_of_its_own_message_and_no_other(env):
    _mark(env, "project", "tier")
    _publish(env, "s-1", [(ALICE, "I moved to Porto last month.", {"project": "apollo", "tier": 2, "crm": "x"}),
                          (None, "Noted.", {"project": "zeus"}),
                          (ALICE, "The Mars Festival budget is $50,000.", {"channel": "web"}),
                          (None, "Sure.", {})])
    _form(env, "s-1")
    assert _kept(env) == {"The user moved to Porto last month": {"project": "apollo", "tier": 2},
                          "The Mars Festival budget is $50,000": {}}


def test_an_update_joins_the_values_of_its_new_message_to_the_facts(env):
    _mark(env, "project", "tier")
    _publish(env, "s-1", [(ALICE, "The Mars Festival budget is $50,000.", {"project": "zeus"}), (None, "Ok.", {})])
    _form(env, "s-1")
    _publish(env, "s-2", [(ALICE, "The Mars Festival budget is now $60,000.", {"project": "hermes", "tier": 3}),
                          (None, "Noted.", {})])
    _form(env, "s-2")
    [fact] = env.live_facts()
    assert (fact.content, fact.version) == ("The Mars Festival budget is now $60,000", 2)
    assert fact.metadata == {"project": ["zeus", "hermes"], "tier": 3}


def test_keys_marked_later_apply_to_facts_formed_afterwards_only(env):
    _publish(env, "s-1", [(ALICE, "I moved to Porto last month.", {"project": "apollo"}), (None, "Noted.", {})])
    _form(env, "s-1")
    _mark(env, "project")
    _publish(env, "s-2", [(ALICE, "The Mars Festival budget is $50,000.", {"project": "zeus"}), (None, "Ok.", {})])
    _form(env, "s-2")
    assert _kept(env) == {"The user moved to Porto last month": {},
                          "The Mars Festival budget is $50,000": {"project": "zeus"}}


def test_a_persons_metadata_value_is_gone_after_forget_user(env):
    _mark(env, "crm_email")
    _publish(env, "s-alice", [(ALICE, "I moved to Porto last month.", {"crm_email": CRM_EMAIL}),
                              (None, "Noted.", {})])
    _form(env, "s-alice")
    assert [f.metadata for f in env.live_facts()] == [{"crm_email": CRM_EMAIL}]  # kept by her fact too

    forget_user(env.store, ALICE, settings=env.settings, llm=OfflineLLM(env.settings), clock=env.clock)

    assert CRM_EMAIL not in json.dumps(env.store.admin.dump_all(), default=str)
