"""The maintenance task that runs a job the HTTP API queued (a forget-user): it carries the
job out, records how it ended on the job (failed with the reason when the retry policy gives
up), and leaves no user id on it."""

from __future__ import annotations

import pytest
from celery.exceptions import Retry

from pipeline.formation import consolidate_stages as cs
from pipeline.formation.runner import Usage
from pipeline.llm.scripted import Fault, Rule
from schemas.access import Job, subject_digest
from testkit.documents import fact
from testkit.formation import facts, merge_all, reflections
from workers import maintenance


def test_a_forget_job_erases_the_user_and_ends_done_without_their_id(worker_deps):
    deps = worker_deps()
    store = deps.store
    store.facts.insert_fact(fact("f1", "Alice's email is alice@example.com", agent="A", user="u1"))
    store.facts.insert_fact(fact("f2", "Bob's phone is 555 0100", agent="A", user="u2"))
    store.access.set_user_memory("A", "u1", False, deps.clock.now())
    store.access.put_job(Job(job_id="j1", kind="forget_user", agent_id="A", user_id="u1", subject=subject_digest("A", "u1"),
                      created_at=deps.clock.now(), requested_by="tok_abc", requested_kind="user"))
    assert maintenance.run_job("j1") == {"job_id": "j1", "status": "done"}
    job = store.access.get_job("j1")
    assert job.status == "done" and job.user_id is None and job.finished_at is not None
    assert job.counts["user_switches"] == 1
    assert [f.fact_id for f in store.facts.get_facts(["f1", "f2"])] == ["f2"]
    assert store.access.user_memory_off("A", ["u1"]) == set()
    [entry] = store.access.list_audit(action="forget_user")
    assert (entry.credential_id, entry.outcome, entry.counts["user_switches"]) == ("tok_abc", "ok", 1)
    assert "u1" not in entry.model_dump_json()
    # a redelivery of an ended job changes nothing
    assert maintenance.run_job("j1") == {"job_id": "j1", "status": "done"}


def test_an_unknown_job_is_reported_and_a_bad_one_fails_with_its_error_type(worker_deps):
    deps = worker_deps()
    assert maintenance.run_job("nope") == {"job_id": "nope", "status": "unknown"}
    deps.store.access.put_job(Job(job_id="j2", kind="forget_user", agent_id="A", user_id=" ", subject="x",
                           created_at=deps.clock.now()))
    assert maintenance.run_job("j2") == {"job_id": "j2", "status": "failed"}
    assert deps.store.access.get_job("j2").error == "InvalidInput"


def _blob_of_two_users(env) -> None:
    """agent-1's blob absorbed a reflection of u-1 and one of u-2: forgetting u-1 merges it again."""
    for user, session, said in (("u-1", "s-1", "Quokka Hall parking is awful"),
                                ("u-2", "s-2", "Please keep budget notes short")):
        env.llm.on("extract_facts", facts(), times=1)
        env.llm.on("extract_reflections", reflections(agent=[said]), times=1)
        run_id = env.new_run([("user", user, said), ("assistant", None, "Noted.")], session_id=session, users=(user,))
        env.through_reflections(run_id)
    env.llm.on("consolidate", merge_all)
    cs.merge_scope(env, "agent-1", "agent", model="m", holder="h-1", usage=Usage(), session_end="s-2")


def test_a_job_whose_retries_run_out_ends_failed_with_the_reason_never_left_running(injected, delivery, sent):
    env = injected  # a forget that rebuilds a blob calls the LLM
    _blob_of_two_users(env)
    env.llm.rules.insert(0, Rule("*", Fault("server_error")))  # the model stays down from now on
    env.store.access.put_job(Job(job_id="j3", kind="forget_user", agent_id="agent-1", user_id="u-1",
                          subject=subject_digest("agent-1", "u-1"), created_at=env.clock.now(),
                          requested_by="key_admin", requested_kind="admin"))
    task = maintenance.run_job
    with delivery(task, 0, job_id="j3"), pytest.raises(Retry):
        task.run(job_id="j3")
    assert env.store.access.get_job("j3").status == "running" and sent == [(task.name, {"job_id": "j3"})]
    retries = env.settings.task_max_retries
    with delivery(task, retries, job_id="j3"):
        assert task.run(job_id="j3") == {"job_id": "j3", "status": "failed"}
    job = env.store.access.get_job("j3")
    assert job.status == "failed" and job.finished_at is not None and job.user_id is None
    assert job.error == f"TransientError: gave up after {retries} retries"  # the type only, as every job error
    [entry] = env.store.access.list_audit(action="forget_user")
    assert (entry.credential_id, entry.outcome) == ("key_admin", "failed")
    # the caller polling the job reads the same
    with delivery(task, 0, job_id="j3"):
        assert task.run(job_id="j3") == {"job_id": "j3", "status": "failed"}
