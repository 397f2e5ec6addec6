"""Flower, started before a real worker on the real Redis broker, shows the worker and every
stage task of a formation with the run id in its arguments (SPEC §9)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ops.procs import REPO_ROOT, free_port
from pipeline import names
from pipeline.store import open_store
from schemas.documents import STAGES
from schemas.settings import Settings
from workers.producer import CeleryPublisher, end_session, publish_messages

AUTH = "ops:flower-pass"
TIMEOUT_S = 90
CONVERSATION = [
    ("user", "Hi, I'm Ana Souza. I work as a nurse at Santa Maria hospital in Lisbon."),
    ("assistant", "Nice to meet you, Ana. How can I help?"),
    ("user", "My email is ana.souza@example.org and I prefer short answers."),
    ("assistant", "Noted: short answers, and your email."),
    ("user", "I'm allergic to penicillin, please remember that."),
    ("assistant", "I'll remember your penicillin allergy."),
]


def _api(port: int, path: str):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    request.add_header("Authorization", "Basic " + base64.b64encode(AUTH.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


def _until(check, what: str, log_file=None):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    log = log_file.read_text(errors="replace")[-3000:] if log_file else ""
    pytest.fail(f"timed out waiting for {what}\n{log}")


@pytest.fixture
def flower(tmp_path, broker_urls):
    port = free_port()
    log_file = tmp_path / "flower.log"
    env = {**os.environ, "MEMORY_BROKER_URL": broker_urls[0], "MEMORY_RESULT_BACKEND": broker_urls[1],
           "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.app", "flower", f"--port={port}",
             f"--basic-auth={AUTH}", "--address=127.0.0.1"],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        _until(lambda: proc.poll() is None and _api(port, "/api/workers")[0] == 200, "Flower's API", log_file)
        yield port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def test_flower_lists_the_worker_and_every_stage_of_a_formation_with_its_run_id(
    flower, tmp_path, broker_urls, celery_worker_process, celery_app_for
):
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    worker = celery_worker_process(
        store_url=store_url, queues=names.QUEUES, pool="threads", concurrency=4,
        hostname="flowertest@%h",
        extra_env={"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"},
    )
    _until(lambda: any(n.startswith("flowertest@") for n in (_api(flower, "/api/workers?refresh=1")[1] or {})),
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
            runs = store.list_runs(session_id="s-flower")
            broken = [r for r in runs if r.status in ("failed", "dead")]
            if broken:
                pytest.fail(f"the formation run failed: {broken[0].error}\n{worker.log_text()[-3000:]}")
            return runs if runs and all(r.status == "done" for r in runs) else None

        [run] = _until(finished, "the formation run to finish", worker.log_file)
    finally:
        store.close()
    # fan-out stages are recorded as "consolidate_scope:<index>"; the task is one name
    stage_tasks = {f"memory.{stage.split(':')[0]}" for stage in run.stages}
    assert {f"memory.{stage}" for stage in STAGES} <= stage_tasks

    def shown():
        status, tasks = _api(flower, "/api/tasks?limit=1000")
        if status != 200 or not tasks:
            return None
        seen = {t.get("name") for t in tasks.values() if run.run_id in str(t.get("kwargs"))}
        return seen if stage_tasks <= seen else None

    seen = _until(shown, f"Flower to show {sorted(stage_tasks)} with run id {run.run_id}", worker.log_file)
    assert stage_tasks <= seen
