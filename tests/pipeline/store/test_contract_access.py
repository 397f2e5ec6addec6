"""The store contract, part 3: API keys, the audit log, jobs and users' memory switches
(design §12 "Interfaces"). Runs unchanged against every adapter (the ``store`` fixture)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from schemas.access import ApiKey, AuditEntry, Job, key_digest, subject_digest
from testkit.documents import T0


def _key(key_id: str, secret: str, **fields) -> ApiKey:
    return ApiKey(key_id=key_id, kind=fields.pop("kind", "agent"), agent_id=fields.pop("agent_id", "a1"),
                  digest=key_digest(secret), created_at=fields.pop("created_at", T0), **fields)


def test_a_key_is_found_by_the_digest_of_its_secret_and_never_by_the_secret(store):
    store.access.put_api_key(_key("k1", "secret-one"))
    found = store.access.find_api_key(key_digest("secret-one"))
    assert found is not None and found.key_id == "k1" and found.agent_id == "a1"
    assert store.access.find_api_key("secret-one") is None
    assert store.access.find_api_key(key_digest("secret-two")) is None
    assert "secret-one" not in repr(store.access.list_api_keys())


def test_a_second_key_with_the_same_id_or_secret_is_refused(store):
    store.access.put_api_key(_key("k1", "secret-one"))
    with pytest.raises(ValueError):
        store.access.put_api_key(_key("k1", "secret-two"))
    with pytest.raises(ValueError):
        store.access.put_api_key(_key("k2", "secret-one"))
    assert [k.key_id for k in store.access.list_api_keys()] == ["k1"]


def test_revoking_keeps_the_key_listed_with_the_first_revocation_time(store):
    store.access.put_api_key(_key("k1", "s1"))
    store.access.put_api_key(_key("k2", "s2", created_at=T0 + timedelta(seconds=1), kind="admin", agent_id=None))
    first = store.access.revoke_api_key("k1", T0 + timedelta(minutes=1))
    again = store.access.revoke_api_key("k1", T0 + timedelta(minutes=5))
    assert first.revoked_at == again.revoked_at == T0 + timedelta(minutes=1)
    assert store.access.find_api_key(key_digest("s1")).revoked_at == T0 + timedelta(minutes=1)
    assert store.access.revoke_api_key("nope", T0) is None
    assert [(k.key_id, k.revoked_at is None) for k in store.access.list_api_keys()] == [("k1", False), ("k2", True)]


def test_audit_entries_come_back_newest_first_filtered_by_time_and_action(store):
    for i, action in enumerate(["key.create", "forget_user", "item.edit", "forget_user"]):
        store.access.record_audit(AuditEntry(audit_id=f"e{i}", at=T0 + timedelta(minutes=i), credential_id="k1",
                                      credential_kind="admin", action=action, counts={"facts": i}))
    assert [e.audit_id for e in store.access.list_audit()] == ["e3", "e2", "e1", "e0"]
    assert [e.audit_id for e in store.access.list_audit(since=T0 + timedelta(minutes=2))] == ["e3", "e2"]
    assert [e.audit_id for e in store.access.list_audit(action="forget_user")] == ["e3", "e1"]
    assert [e.audit_id for e in store.access.list_audit(limit=1)] == ["e3"]
    assert store.access.list_audit()[0].counts == {"facts": 3}


def test_a_job_is_stored_and_replaced_whole(store):
    job = Job(job_id="j1", kind="forget_user", agent_id="a1", user_id="u1", subject=subject_digest("a1", "u1"),
              created_at=T0)
    store.access.put_job(job)
    assert store.access.get_job("j1") == job
    done = job.model_copy(update={"status": "done", "user_id": None, "finished_at": T0, "counts": {"facts": 2}})
    store.access.put_job(done)
    assert store.access.get_job("j1") == done
    assert store.access.get_job("j2") is None


def test_user_memory_is_on_until_the_user_switches_it_off_per_agent(store):
    assert store.access.user_memory_off("a1", ["u1", "u2"]) == set()
    store.access.set_user_memory("a1", "u1", False, T0)
    assert store.access.user_memory_off("a1", ["u1", "u2"]) == {"u1"}
    assert store.access.user_memory_off("a2", ["u1"]) == set()
    store.access.set_user_memory("a1", "u1", True, T0 + timedelta(seconds=1))
    assert store.access.user_memory_off("a1", ["u1"]) == set()
    assert store.access.user_memory_off("a1", []) == set()


def test_forgetting_a_users_switches_leaves_other_users_and_agents(store):
    store.access.set_user_memory("a1", "u1", False, T0)
    store.access.set_user_memory("a2", "u1", False, T0)
    store.access.set_user_memory("a1", "u2", False, T0)
    assert store.access.forget_user_switches("u1", "a1") == 1
    assert store.access.user_memory_off("a1", ["u1", "u2"]) == {"u2"}
    assert store.access.user_memory_off("a2", ["u1"]) == {"u1"}
    assert store.access.forget_user_switches("u1") == 1
    assert store.access.user_memory_off("a2", ["u1"]) == set()


def test_an_agents_instructions_and_pauses_round_trip_and_an_old_key_reads_and_publishes(store):
    from schemas.documents import AgentSettings
    from schemas.owner import Instruction, Pause

    store.ingest.put_agent_settings(AgentSettings(
        agent_id="a1", instructions=[Instruction(stage="extraction", scope="user", version=1, text="focus: venue",
                                                 set_by="k1", set_at=T0)],
        paused=[Pause(scope_key="session:s1", paused_at=T0, paused_by="k1")]))
    got = store.ingest.get_agent_settings("a1")
    assert got.instructions[0].text == "focus: venue" and got.paused[0].scope_key == "session:s1"
    store.access.put_api_key(_key("k-old", "secret-old"))  # stored as before scopes existed: the default
    assert store.access.find_api_key(key_digest("secret-old")).scopes == ["read", "publish"]


def test_a_backfill_run_is_inserted_once_and_takes_no_session_claim(store):
    from schemas.documents import FormationRun

    run = FormationRun(run_id="r1-backfill-agent", agent_id="a1", session_id="s1", seq_from=1, seq_to=3,
                       reason="backfill", created_at=T0, only_scopes=["agent"])
    assert store.runs.insert_run(run) is True and store.runs.insert_run(run) is False
    assert store.runs.get_run("r1-backfill-agent").only_scopes == ["agent"]
    assert store.ingest.get_session("s1") is None


def test_a_pending_reflection_is_edited_with_history_and_an_absorbed_one_is_not(store):
    from schemas.documents import Reflection

    store.reflections.insert_reflections([Reflection(reflection_id=rid, agent_id="a1", scope="agent", scope_key="agent",
                                         content=f"text of {rid}", formed_at=T0) for rid in ("r1", "r2")])
    store.reflections.mark_absorbed(["r2"], 1, T0)
    edited = store.reflections.edit_reflection("r1", "new text", T0 + timedelta(minutes=1), "k1")
    assert edited.content == "new text" and edited.history[0].content == "text of r1"
    [stored] = store.reflections.unabsorbed_reflections("a1", "agent")
    assert (stored.content, stored.history[0].changed_by) == ("new text", "k1")
    assert store.reflections.edit_reflection("r2", "x", T0, "k1") is None and store.reflections.edit_reflection("nope", "x", T0, "k1") is None
