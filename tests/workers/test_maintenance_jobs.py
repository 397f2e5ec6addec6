"""The maintenance task that runs a job the HTTP API queued (a forget-user): it carries the
job out, records how it ended on the job, and leaves no user id on it."""

from __future__ import annotations

from schemas.access import Job, subject_digest
from testkit.documents import fact
from workers import maintenance


def test_a_forget_job_erases_the_user_and_ends_done_without_their_id(worker_deps):
    deps = worker_deps()
    store = deps.store
    store.insert_fact(fact("f1", "Alice's email is alice@example.com", agent="A", user="u1"))
    store.insert_fact(fact("f2", "Bob's phone is 555 0100", agent="A", user="u2"))
    store.set_user_memory("A", "u1", False, deps.clock.now())
    store.put_job(Job(job_id="j1", kind="forget_user", agent_id="A", user_id="u1", subject=subject_digest("A", "u1"),
                      created_at=deps.clock.now(), requested_by="tok_abc", requested_kind="user"))
    assert maintenance.run_job("j1") == {"job_id": "j1", "status": "done"}
    job = store.get_job("j1")
    assert job.status == "done" and job.user_id is None and job.finished_at is not None
    assert job.counts["user_switches"] == 1
    assert [f.fact_id for f in store.get_facts(["f1", "f2"])] == ["f2"]
    assert store.user_memory_off("A", ["u1"]) == set()
    [entry] = store.list_audit(action="forget_user")
    assert (entry.credential_id, entry.outcome, entry.counts["user_switches"]) == ("tok_abc", "ok", 1)
    assert "u1" not in entry.model_dump_json()
    # a redelivery of an ended job changes nothing
    assert maintenance.run_job("j1") == {"job_id": "j1", "status": "done"}


def test_an_unknown_job_is_reported_and_a_bad_one_fails_with_its_error_type(worker_deps):
    deps = worker_deps()
    assert maintenance.run_job("nope") == {"job_id": "nope", "status": "unknown"}
    deps.store.put_job(Job(job_id="j2", kind="forget_user", agent_id="A", user_id=" ", subject="x",
                           created_at=deps.clock.now()))
    assert maintenance.run_job("j2") == {"job_id": "j2", "status": "failed"}
    assert deps.store.get_job("j2").error == "InvalidInput"
