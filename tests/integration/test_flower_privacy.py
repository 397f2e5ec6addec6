"""Flower shows ids, counts and sizes, never a conversation (design §9): a canary string in the
published messages reaches no answer of a real Flower watching a real worker on real Redis."""

from __future__ import annotations

import urllib.parse

import pytest

from pipeline import names
from pipeline.store import open_store
from schemas.settings import Settings
from testkit.flower import FlowerProcess, api, get, until
from workers.dispatch import send
from workers.producer import CeleryPublisher, end_session, message_event, publish_message, publish_messages

CANARY = "canary-5q7v-ember-lantern"
LINES = [
    ("user", f"I keep my spare key under the {CANARY} flowerpot by the door."),
    ("assistant", "Noted, I will remember where the spare key is."),
    ("user", f"My locker code is {CANARY} and I work nights at the bakery."),
    ("assistant", "Got it: nights at the bakery."),
    ("user", f"Please call me Rui, and remember {CANARY} is my wifi name."),
]


@pytest.fixture
def flower(tmp_path, broker_urls):
    process = FlowerProcess(tmp_path, broker_urls[0])
    yield process
    process.stop()


def test_no_flower_answer_contains_the_content_of_a_message(
    flower, tmp_path, broker_urls, celery_worker_process, celery_app_for
):
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    worker = celery_worker_process(
        store_url=store_url, queues=names.QUEUES, pool="threads", concurrency=4, hostname="privacy@%h",
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"},
    )
    workers = until(lambda: [n for n in (api(flower.port, "/api/workers?refresh=1")[1] or {})
                             if n.startswith("privacy@")], "the worker in /api/workers", worker.log_file)
    node = workers[0]

    app = celery_app_for(*broker_urls)
    publisher = CeleryPublisher(app=app)
    items = [{"agent_id": "agent-p", "session_id": "s-p", "role": role, "content": text, "message_id": f"m{i}",
              "sender_id": "user-rui" if role == "user" else None, "session_users": ["user-rui"]}
             for i, (role, text) in enumerate(LINES)]
    publish_messages(items[:-1], publisher=publisher)              # one batch message
    publish_message(publisher=publisher, **items[-1])              # one single-event message
    # rejected by the worker: the producer refuses such an event itself, so it goes on the
    # queue as another producer's could
    wizard = message_event(agent_id="agent-p", session_id="s-p", role="user", sender_id="user-rui",
                           content=f"rejected, {CANARY}")
    wizard["message"]["role"] = "wizard"
    send(names.TASK_INGEST_EVENT, {"event": wizard}, app=app)
    end_session("agent-p", "s-p", publisher=publisher)
    publisher.close()
    # held by the worker for later (as a deferred session end or a retry is): what the worker's
    # "scheduled" inspect reply shows
    later = message_event(agent_id="agent-p", session_id="s-later", role="user", sender_id="user-rui",
                          content=f"later: {CANARY}")
    send(names.TASK_INGEST_EVENT, {"event": later}, countdown=600, app=app)

    store = open_store(Settings(store_url=store_url))
    try:
        until(lambda: any(r.status == "done" for r in store.runs.list_runs(session_id="s-p")),
              "the formation run to finish", worker.log_file)
    finally:
        store.close()

    def scheduled_shown():
        status, info = api(flower.port, f"/api/workers?refresh=1&workername={urllib.parse.quote(node)}")
        held = (info or {}).get(node, {}).get("scheduled") or []
        return info if status == 200 and held else None

    worker_info = until(scheduled_shown, "the held task in the worker's scheduled list", worker.log_file)
    held = worker_info[node]["scheduled"][0]["request"]
    assert later["event_id"] in str(held["kwargs"]) and "bytes" in str(held["kwargs"])

    def tasks_shown():
        status, tasks = api(flower.port, "/api/tasks?limit=1000")
        kinds = {t.get("name") for t in (tasks or {}).values()}
        wanted = {names.TASK_INGEST_BATCH, names.TASK_INGEST_EVENT, names.TASK_EXTRACT_FACTS, names.TASK_FINISH}
        return tasks if status == 200 and wanted <= kinds else None

    tasks = until(tasks_shown, "Flower to list the ingest and formation tasks", worker.log_file)
    ingest = [t for t in tasks.values() if t["name"] == names.TASK_INGEST_EVENT]
    assert any(later["event_id"] in str(t.get("kwargs")) for t in ingest), "ids are shown"

    paths = [
        "/api/workers", f"/api/workers?refresh=1&workername={urllib.parse.quote(node)}",
        "/api/tasks?limit=1000", "/api/task/types", "/api/queues/length", "/metrics",
        "/", "/workers", f"/worker/{urllib.parse.quote(node)}", "/tasks", "/broker",
        "/tasks/datatable?draw=1&start=0&length=1000&search%5Bvalue%5D=&order%5B0%5D%5Bcolumn%5D=0"
        "&order%5B0%5D%5Bdir%5D=asc&columns%5B0%5D%5Bdata%5D=name",
    ]
    for task_id in tasks:
        paths += [f"/api/task/info/{task_id}", f"/task/{task_id}"]
    answers = {path: get(flower.port, path) for path in paths}
    failed = {path: status for path, (status, _) in answers.items() if status != 200}
    assert failed == {}
    leaks = [path for path, (_, body) in answers.items() if CANARY.encode() in body]
    assert leaks == []
