"""The API as a user starts it: ``memoryctl serve`` (uvicorn, two worker processes) on a
SQLite store, with a real redis-server for the rate limits. The quick start of docs/api.md runs as
written; the rate limit holds across workers; the access log carries no message text."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from testkit.procs import REPO_ROOT, RedisServer, free_port, require_redis_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("api-redis"), databases=4)
    yield server.url(0)
    server.stop()


def _env(tmp_path, redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_STORE_URL=f"sqlite:///{tmp_path / 'memory.db'}", MEMORY_BROKER_URL=redis_url,
               MEMORY_EMBEDDING_PROVIDER="hashing", MEMORY_LLM_PROVIDER="offline",
               PATH=f"{os.path.dirname(sys.executable)}:{env.get('PATH', '')}", PYTHONPATH=str(REPO_ROOT), **extra)
    return env


def _memoryctl(env, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ops.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout.strip()


class Served:
    def __init__(self, env, workers: int = 2) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ops.cli", "serve", "--port", str(self.port), "--workers", str(workers)],
            env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"memoryctl serve did not answer: {self.output}")

    def stop(self) -> str:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.output = self.proc.stdout.read()
        return self.output


def test_the_rate_limit_holds_across_worker_processes_and_the_log_carries_no_message_text(tmp_path, redis_url):
    env = _env(tmp_path, redis_url, MEMORY_API_RATE_LIMIT_PER_MINUTE="30")
    _memoryctl(env, "create-indexes")
    key = _memoryctl(env, "keys", "create", "--agent", "A")
    served = Served(env)
    try:
        headers = {"Authorization": f"Bearer {key}"}
        secret_text = "zebra-quartz-unique-7781"
        statuses = []
        # the limiter counts per wall-clock minute (api/limits.py): 40 requests that straddle a
        # minute's end would be counted in two windows, so they start with one
        if time.time() % 60 > 40:
            time.sleep(60 - time.time() % 60)
        for i in range(40):  # a new connection each time: the kernel spreads them over the workers
            body = {"messages": [{"message_id": f"m{i}", "role": "user", "sender_id": "u1", "content": secret_text}]}
            with httpx.Client(base_url=served.url, headers=headers, timeout=10) as client:
                if i % 2:
                    statuses.append(client.post("/v1/agents/A/sessions/s1/search",
                                                json={"query": secret_text, "user_id": "u1"}).status_code)
                else:
                    statuses.append(client.post("/v1/agents/A/sessions/s1/messages", json=body).status_code)
        assert statuses.count(429) == 10, statuses
        assert set(statuses[:30]) <= {200, 202}
        refused = httpx.get(f"{served.url}/v1/agents/A/stats", headers=headers)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    finally:
        log = served.stop()
    assert "POST /v1/agents/A/sessions/s1/messages" in log  # the access log is on
    assert secret_text not in log and key not in log


def test_the_api_docs_quick_start_runs_as_written(tmp_path, redis_url):
    page = (REPO_ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    block = page.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    port = str(free_port())
    script = block.replace("8080", port)
    env = _env(tmp_path, redis_url)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", f"trap 'kill -INT %1 2>/dev/null; wait' EXIT\n{script}"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    context = json.loads(done.stdout.strip().splitlines()[-1])
    assert context["agent_id"] == "agent-juniper" and context["user_id"] == "user-maya"


def test_a_user_asks_to_be_forgotten_and_a_real_maintenance_worker_does_it(tmp_path, redis_url):
    from testkit.procs import WorkerProcess

    redis_db1 = redis_url.rsplit("/", 1)[0] + "/1"
    env = _env(tmp_path, redis_db1, MEMORY_API_TOKEN_SECRETS='{"k1": "' + "s" * 40 + '"}')
    _memoryctl(env, "create-indexes")
    from pipeline.store.sqlite import SQLiteStore
    from testkit.documents import fact

    store = SQLiteStore(str(tmp_path / "memory.db"))
    store.facts.insert_fact(fact("f1", "Alice's email is alice@example.com", agent="A", user="u1"))
    store.facts.insert_fact(fact("f2", "Bob's phone is 555 0100", agent="A", user="u2"))
    token = _memoryctl(env, "keys", "token", "--agent", "A", "--user", "u1", "--ttl", "600")
    worker = WorkerProcess(broker_url=redis_db1, result_backend="", store_url=env["MEMORY_STORE_URL"],
                           log_file=tmp_path / "worker.log", queues=("maintenance",), concurrency=1,
                           extra_env={k: env[k] for k in ("MEMORY_EMBEDDING_PROVIDER", "MEMORY_LLM_PROVIDER")})
    served = Served(env, workers=1)
    try:
        worker.wait_ready()
        headers = {"Authorization": f"Bearer {token}"}
        queued = httpx.post(f"{served.url}/v1/agents/A/users/u1/forget", headers=headers)
        assert queued.status_code == 202, queued.text
        job_url = f"{served.url}/v1/jobs/{queued.json()['job_id']}"
        deadline = time.monotonic() + 60
        while httpx.get(job_url, headers=headers).json()["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, worker.log_text()[-3000:]
            time.sleep(0.2)
        done = httpx.get(job_url, headers=headers).json()
        assert done["status"] == "done", (done, worker.log_text()[-3000:])
        assert [f.fact_id for f in store.facts.get_facts(["f1", "f2"])] == ["f2"]
    finally:
        served.stop()
        worker.stop()
        store.close()
