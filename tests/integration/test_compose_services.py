"""Each worker, beat and Flower service of docker-compose.yml, run with the exact argv of the
compose file against a local redis-server and a SQLite store: it must report ready (and pass
its own healthcheck where that runs outside a container), then stop cleanly."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from testkit.procs import REPO_ROOT, free_port

COMPOSE = REPO_ROOT / "docker-compose.yml"
READY_TIMEOUT_S = 90
SERVICES = yaml.safe_load(COMPOSE.read_text())["services"]
WORKERS = sorted(name for name, svc in SERVICES.items() if "worker" in (svc.get("command") or [])[3:4])
VENV_BIN = str(Path(sys.executable).parent)


class ServiceProcess:
    """One compose service's command, in its own process group, logging to a file."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.env = env
        self.cwd = cwd
        self.log_file = cwd / f"{name}.log"
        self._log = open(self.log_file, "ab")
        self.proc = subprocess.Popen(
            SERVICES[name]["command"], cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-3000:]}"
            if ready():
                return
            time.sleep(0.2)
        pytest.fail(f"{self.name} did not report {what} within {READY_TIMEOUT_S} s:\n{self.log()[-3000:]}")

    def healthcheck(self) -> subprocess.Popen:
        """The service's own CMD-SHELL healthcheck, as the container would run it (started;
        ``communicate()`` for its outcome)."""
        kind, command = SERVICES[self.name]["healthcheck"]["test"]
        assert kind == "CMD-SHELL"
        return subprocess.Popen(["sh", "-c", command.replace("$$", "$")], cwd=self.cwd, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._log.close()
        return self.proc.returncode


def _env(name: str, broker_urls, store_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The service's literal environment from the compose file; what compose interpolates
    (secrets, URLs) is pointed at the local redis-server and SQLite store."""
    env = {k: str(v) for k, v in os.environ.items()}
    for key, value in (SERVICES[name].get("environment") or {}).items():
        if "${" not in str(value):
            env[key] = str(value)
    env.update({
        "MEMORY_BROKER_URL": broker_urls[0], "MEMORY_RESULT_BACKEND": broker_urls[1],
        "MEMORY_STORE_URL": store_url, "MEMORY_ATLAS_SEARCH": "false",
        "MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing",
        "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
        "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", "HOSTNAME": socket.gethostname(),
        **extra,
    })
    return env


@pytest.fixture
def run_service(tmp_path, broker_urls):
    started: list[ServiceProcess] = []
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"

    def run(name: str, **extra: str) -> ServiceProcess:
        cwd = tmp_path / name
        cwd.mkdir()
        service = ServiceProcess(name, _env(name, broker_urls, store_url, extra), cwd)
        started.append(service)
        return service

    yield run
    for service in started:
        service.terminate()
    for service in started:
        service.stop()


def test_the_compose_file_has_the_four_workers_this_test_runs():
    assert WORKERS == ["worker-consolidation", "worker-formation", "worker-ingest", "worker-maintenance"]


def test_every_worker_service_starts_reports_ready_and_passes_its_healthcheck(run_service):
    workers = [run_service(name) for name in WORKERS]
    for worker in workers:
        worker.wait_for(lambda w=worker: " ready." in w.log(), "ready")
    checks = {worker.name: worker.healthcheck() for worker in workers}
    for name, check in checks.items():
        output, _ = check.communicate(timeout=60)
        assert check.returncode == 0, f"{name} healthcheck failed: {output}"
    for worker in workers:
        worker.terminate()
    for worker in workers:
        assert worker.stop() is not None


def test_the_beat_service_starts_and_passes_its_healthcheck(run_service):
    beat = run_service("beat")
    beat.wait_for(lambda: "beat: Starting" in beat.log(), "beat: Starting")
    beat.wait_for(lambda: (beat.cwd / "celerybeat.pid").exists(), "its pid file")
    check = beat.healthcheck()
    output, _ = check.communicate(timeout=60)
    assert check.returncode == 0, output
    beat.stop()


def _get(url: str, auth: str | None) -> int:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_the_flower_service_serves_its_api_only_with_basic_auth(run_service):
    port = free_port()
    flower = run_service("flower", FLOWER_PORT=str(port), FLOWER_BASIC_AUTH="ops:s3cret")
    api = f"http://127.0.0.1:{port}/api/workers"
    flower.wait_for(lambda: _get(api, "ops:s3cret") == 200, "HTTP 200 with basic auth")
    assert _get(api, None) == 401
    assert _get(api, "ops:wrong") == 401
    assert _get(f"http://127.0.0.1:{port}/healthcheck", None) == 200
    flower.stop()
