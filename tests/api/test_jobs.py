"""Forget jobs of the HTTP API: a repeated request returns the job already queued or running
(however many arrive at once), a new one is queued only once the last has ended, and a job the
broker did not take ends failed at once instead of waiting queued forever."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from usecases.jobs import finish_job, start_job
from pipeline.errors import TransientError
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)


@pytest.fixture
def me(api):
    return {"Authorization": f"Bearer {api.token(user='u1')}"}


@pytest.fixture
def admin(api):
    return {"Authorization": f"Bearer {api.keys['admin']}"}


def _forget(client, headers):
    response = client.post("/v1/agents/A/users/u1/forget", headers=headers)
    assert response.status_code == 202, response.text
    return response.json()


def test_a_repeated_forget_returns_the_job_already_queued_or_running(api, client, me, admin):
    first = _forget(client, me)
    assert _forget(client, me)["job_id"] == first["job_id"]
    # the same erasure asked by an admin is the same job too
    by_admin = client.post("/v1/admin/forget-user", json={"user_id": "u1", "agent_id": "A"}, headers=admin)
    assert by_admin.status_code == 202 and by_admin.json()["job_id"] == first["job_id"]
    start_job(api.deps.store, first["job_id"])  # a worker took it
    running = _forget(client, me)
    assert (running["job_id"], running["status"]) == (first["job_id"], "running")
    assert api.jobs == [first["job_id"]]  # sent once
    # every request is audited, each under its own credential
    assert len(api.deps.store.access.list_audit(action="forget_user")) == 4

    finish_job(api.deps, api.deps.store.access.get_job(first["job_id"]))
    again = _forget(client, me)
    assert again["job_id"] != first["job_id"] and again["status"] == "queued"
    assert api.jobs == [first["job_id"], again["job_id"]]
    assert client.get(f"/v1/jobs/{first['job_id']}", headers=me).json()["status"] == "done"
    # another erasure (every agent, not this one) is another job
    everywhere = client.post("/v1/admin/forget-user", json={"user_id": "u1"}, headers=admin).json()
    assert everywhere["job_id"] not in (first["job_id"], again["job_id"])


def test_identical_forgets_arriving_at_once_queue_one_job(api, client, me, monkeypatch):
    # the worst interleaving, forced: every request reads "no such job" before any stores one,
    # and the one storing it is slow
    read_all = threading.Barrier(8, timeout=10)
    get_job, waited = api.deps.store.access.get_job, threading.local()

    def get_job_once_all_read(job_id):
        found = get_job(job_id)
        if not getattr(waited, "done", False):
            waited.done = True
            read_all.wait()
        return found

    put_job = api.deps.store.access.put_job

    def slow_put_job(job):  # a slow write: every other request looks again meanwhile
        time.sleep(0.5)
        put_job(job)

    monkeypatch.setattr(api.deps.store.access, "get_job", get_job_once_all_read)
    monkeypatch.setattr(api.deps.store.access, "put_job", slow_put_job)
    returned: list[str] = []
    threads = [threading.Thread(target=lambda: returned.append(_forget(client, me)["job_id"])) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(returned) == 8 and len(set(returned)) == 1
    assert api.jobs == returned[:1]


def test_a_forget_the_broker_did_not_take_fails_at_once_and_the_next_request_queues_anew(api, client, me):
    ctx = api.app.state.ctx
    sent = ctx.send_job

    def refused(job_id: str) -> None:
        raise TransientError("the broker at redis://broker:6379/0 did not accept memory.run_job after 3 retries")

    ctx.send_job = refused
    response = client.post("/v1/agents/A/users/u1/forget", headers=me)
    assert response.status_code == 503 and response.headers["Retry-After"]
    [job] = [api.deps.store.access.get_job(j) for j in _job_ids(api)]
    assert job.status == "failed" and job.error.startswith("TransientError: not queued")
    assert job.user_id is None  # an ended job keeps no user id
    ctx.send_job = sent
    retried = _forget(client, me)
    assert retried["job_id"] != job.job_id and api.jobs == [retried["job_id"]]


def _job_ids(api) -> list[str]:
    from usecases.jobs import job_id_for
    from schemas.access import subject_digest

    subject = subject_digest("A", "u1")
    ids = [job_id_for("forget_user", subject, n) for n in range(3)]
    return [i for i in ids if api.deps.store.access.get_job(i) is not None]


def test_a_job_left_queued_by_a_lost_message_is_sent_again_when_asked_for(api, client, me):
    first = _forget(client, me)
    assert _forget(client, me)["job_id"] == first["job_id"] and api.jobs == [first["job_id"]]
    # the broker lost the message: the job is still queued long after it was sent
    store = api.deps.store
    stale = store.access.get_job(first["job_id"])
    store.access.put_job(stale.model_copy(update={"created_at": stale.created_at - timedelta(hours=1)}))
    again = _forget(client, me)
    assert (again["job_id"], again["status"]) == (first["job_id"], "queued")
    assert api.jobs == [first["job_id"], first["job_id"]]  # sent again, once
    _forget(client, me)
    assert api.jobs == [first["job_id"], first["job_id"]]  # not again: it was just sent
    # a delivery after the first started it changes nothing
    assert start_job(store, first["job_id"]).status == "running"
    assert start_job(store, first["job_id"]).status == "running"
