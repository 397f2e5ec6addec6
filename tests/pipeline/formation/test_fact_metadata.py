"""Event metadata from publish to facts (design §13 "Categories and metadata"): the producer's
events go through the real ingest, formation runs the real stages with the offline rules
provider, on SQLite and on the Mongo store over the Atlas emulation."""

from __future__ import annotations

import json

import pytest

from pipeline.ingest import ingest_raw_events
from pipeline.llm.offline import OfflineLLM
from testkit.formation import make_atlas_env, make_env
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


def test_a_persons_metadata_value_is_gone_after_forget_user(env):
    _publish(env, "s-alice", [(ALICE, "I am Alice and I prefer short answers.", {"crm_email": CRM_EMAIL}),
                              (None, "Noted.", {})])
    assert CRM_EMAIL in json.dumps(env.store.admin.dump_all(), default=str)  # stored with her message

    forget_user(env.store, ALICE, settings=env.settings, llm=OfflineLLM(env.settings), clock=env.clock)

    assert CRM_EMAIL not in json.dumps(env.store.admin.dump_all(), default=str)
