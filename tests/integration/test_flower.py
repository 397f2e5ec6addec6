"""Flower, started before a real worker on the real Redis broker, shows the worker and every
stage task of a formation with the run id in its arguments, the depth of every queue, and
answers ``/metrics`` only with credentials (design §9)."""

from __future__ import annotations

import pytest

from pipeline import names
from pipeline.store import open_store
from schemas.documents import STAGES
from schemas.settings import Settings
from testkit.flower import FlowerProcess, api, get, until
from workers.dispatch import send
from workers.producer import CeleryPublisher, end_session, publish_message, publish_messages

CONVERSATION = [
    ("user", "Hi, I'm Ana Souza. I work as a nurse at Santa Maria hospital in Lisbon."),
    ("assistant", "Nice to meet you, Ana. How can I help?"),
    ("user", "My email is ana.souza@example.org and I prefer short answers."),
    ("assistant", "Noted: short answers, and your email."),
    ("user", "I'm allergic to penicillin, please remember that."),
    ("assistant", "I'll remember your penicillin allergy."),
]


@pytest.fixture
def flower(tmp_path, broker_urls):
    process = FlowerProcess(tmp_path, broker_urls[0])
    yield process.port
    process.stop()


def test_flower_lists_the_worker_and_every_stage_of_a_formation_with_its_run_id(
    flower, tmp_path, broker_urls, celery_worker_process, celery_app_for
):
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    worker = celery_worker_process(
        store_url=store_url, queues=names.QUEUES, pool="threads", concurrency=4,
        hostname="flowertest@%h",
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"},
    )
    until(lambda: any(n.startswith("flowertest@") for n in (api(flower, "/api/workers?refresh=1")[1] or {})),
           "the worker in /api/workers", worker.log_file)

    publisher = CeleryPublisher(app=celery_app_for(*broker_urls))
    publish_messages([
        {"agent_id": "agent-f", "session_id": "s-flower", "role": role, "content": text,
         "sender_id": "user-ana" if role == "user" else None, "sender_name": "Ana" if role == "user" else None,
         "message_id": f"m{i}", "session_users": ["user-ana"]}
        for i, (role, text) in enumerate(CONVERSATION)
    ], publisher=publisher)
    end_session("agent-f", "s-flower", publisher=publisher)
    publisher.close()

    store = open_store(Settings(store_url=store_url))
    try:
        def finished():
            runs = store.runs.list_runs(session_id="s-flower")
            broken = [r for r in runs if r.status in ("failed", "dead")]
            if broken:
                pytest.fail(f"the formation run failed: {broken[0].error}\n{worker.log_text()[-3000:]}")
            return runs if runs and all(r.status == "done" for r in runs) else None

        [run] = until(finished, "the formation run to finish", worker.log_file)
    finally:
        store.close()
    # fan-out stages are recorded as "consolidate_scope:<index>"; the task is one name
    stage_tasks = {f"memory.{stage.split(':')[0]}" for stage in run.stages}
    assert {f"memory.{stage}" for stage in STAGES} <= stage_tasks

    def shown():
        status, tasks = api(flower, "/api/tasks?limit=1000")
        if status != 200 or not tasks:
            return None
        seen = {t.get("name") for t in tasks.values() if run.run_id in str(t.get("kwargs"))}
        return seen if stage_tasks <= seen else None

    seen = until(shown, f"Flower to show {sorted(stage_tasks)} with run id {run.run_id}", worker.log_file)
    assert stage_tasks <= seen


def test_flower_reports_the_depth_of_every_queue(flower, broker_urls, celery_app_for):
    # no worker consumes anything: what is published stays queued
    app = celery_app_for(*broker_urls)
    publisher = CeleryPublisher(app=app)
    for i in range(3):
        publish_message(agent_id="agent-q", session_id="s-q", role="user", sender_id="u", content=f"message {i}",
                        publisher=publisher)
    publisher.close()
    for i in range(2):
        send(names.TASK_EXTRACT_FACTS, {"run_id": f"run-{i}"}, app=app)
    send(names.TASK_CONSOLIDATE_SCOPE, {"run_id": "run-0", "index": 0, "scope_key": "agent"}, app=app)

    status, body = api(flower, "/api/queues/length")
    assert status == 200, body
    depths = {q["name"]: q["messages"] for q in body["active_queues"]}
    assert depths == {names.QUEUE_INGEST: 3, names.QUEUE_FORMATION: 2, names.QUEUE_CONSOLIDATION: 1,
                      names.QUEUE_MAINTENANCE: 0}

    status, page = get(flower, "/broker")
    assert status == 200
    assert b"redis://" in page and b"workers.transport" not in page


@pytest.mark.parametrize("app", ["workers.flower", "workers.app"])
def test_metrics_answer_only_with_credentials_and_the_healthcheck_stays_open(tmp_path, broker_urls, app):
    process = FlowerProcess(tmp_path, broker_urls[0], app=app)
    try:
        port = process.port
        assert get(port, "/metrics", auth=None)[0] == 401
        assert get(port, "/metrics", auth="ops:wrong-pass")[0] == 401
        status, body = get(port, "/metrics")
        assert status == 200 and b"flower_" in body
        assert get(port, "/healthcheck", auth=None) == (200, b"OK")
    finally:
        process.stop()
