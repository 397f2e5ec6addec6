"""A real Flower process for integration tests, and a small client for its HTTP answers."""

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from testkit.procs import REPO_ROOT, free_port

AUTH = "ops:flower-pass"
TIMEOUT_S = 90


def get(port: int, path: str, auth: str | None = AUTH) -> tuple[int, bytes]:
    """(status, body) of ``GET path``; status 0 when nothing answers."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def api(port: int, path: str, auth: str | None = AUTH) -> tuple[int, Any]:
    """(status, decoded JSON) of ``GET path``; the JSON is None when the body is not JSON."""
    status, body = get(port, path, auth)
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, None


def until(check: Callable[[], Any], what: str, log_file: Path | None = None, timeout: float = TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    log = log_file.read_text(errors="replace")[-3000:] if log_file else ""
    pytest.fail(f"timed out waiting for {what}\n{log}")


class FlowerProcess:
    """``celery -A workers.flower flower`` with basic auth, on a free port of 127.0.0.1."""

    def __init__(self, workdir: Path, broker_url: str, *, app: str = "workers.flower",
                 auth: str = AUTH, extra_env: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        self.log_file = Path(workdir) / f"flower-{self.port}.log"
        env = {**os.environ, "MEMORY_BROKER_URL": broker_url, "PYTHONPATH": str(REPO_ROOT),
               "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        env.pop("FLOWER_UNAUTHENTICATED_API", None)
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", app, "flower", f"--port={self.port}",
                 f"--basic-auth={auth}", "--address=127.0.0.1"],
                cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        until(lambda: self.proc.poll() is None and api(self.port, "/api/workers", auth)[0] == 200,
              "Flower's API", self.log_file)

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
