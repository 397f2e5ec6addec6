"""A real ``uvicorn`` serving ``api.app:create_app`` on a free port of 127.0.0.1, over a given
store, with keys made in that store and user tokens signed by a known secret, as a platform
would. Stopped by its owner.

    with ApiServer(store_url, workers=1) as server:
        server.url, server.agent_key(AGENT), server.user_token(AGENT, "user-maya")
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from testkit.procs import REPO_ROOT, free_port

SECRET = "platform-secret-for-the-tests-" + "x" * 20
KID = "k1"


class ApiServer:
    def __init__(self, store_url: str, env: dict[str, str], *, workers: int = 1, log: Path | None = None) -> None:
        self.store_url = store_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**env, "MEMORY_STORE_URL": store_url, "MEMORY_API_TOKEN_SECRETS": f'{{"{KID}": "{SECRET}"}}',
                    "MEMORY_API_RATE_LIMIT_PER_MINUTE": env.get("MEMORY_API_RATE_LIMIT_PER_MINUTE", "0")}
        self.workers = workers
        self.log = log
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "ApiServer":
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "api.app:create_app", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(self.workers), "--no-access-log", "--log-level", "warning"],
            cwd=REPO_ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {self.proc.returncode}"
                                   + (f": {self.log.read_text()[-3000:]}" if self.log else ""))
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"uvicorn did not answer /healthz within {timeout:.0f} s")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def agent_key(self, agent_id: str | None, kind: str = "agent") -> str:
        """A new key, made in the served store as ``memoryctl keys create`` makes one."""
        from datetime import datetime, timezone

        from usecases.keys import create_key
        from pipeline.store import open_store
        from schemas.settings import Settings

        store = open_store(Settings(_env_file=None, store_url=self.store_url))
        try:
            return create_key(store.access, kind, datetime.now(timezone.utc), agent_id=agent_id)[0]
        finally:
            store.close()

    def user_token(self, agent_id: str, user_id: str, session_id: str | None = None) -> str:
        from usecases.tokens import issue_user_token

        return issue_user_token(SECRET, KID, agent_id=agent_id, user_id=user_id, session_id=session_id,
                                lifetime_s=600)


def demo_api(tmp_path_factory, *, workers: int = 1) -> ApiServer:
    """An ``ApiServer`` (not yet started: use it as a context manager) over a private copy of
    the demo store (``testkit.demo_store``)."""
    import shutil

    from testkit.demo_store import demo_env, formed_demo_store

    source = formed_demo_store(tmp_path_factory)
    folder = tmp_path_factory.mktemp("api")
    shutil.copy(source, folder / "memory.db")
    return ApiServer(f"sqlite:///{folder / 'memory.db'}", demo_env(), workers=workers, log=folder / "uvicorn.log")
