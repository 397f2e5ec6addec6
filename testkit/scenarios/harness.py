"""Shared machinery of the reliability scenarios: a restartable, persistent ``redis-server``,
real Celery workers pointed at it, and waiting helpers.

Bench-only: production runs the stack of docker-compose.yml.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from testkit.procs import REPO_ROOT, WorkerProcess, free_port, redis_server_path

# every queue the formation chain and ingest use, so one worker can run a whole formation
ALL_QUEUES = ("ingest", "formation", "consolidation", "maintenance")


class PersistentRedis:
    """``redis-server --appendonly yes --appendfsync always`` on a fixed port: every write it
    acknowledged survives a SIGKILL, and ``restart()`` brings it back on the same port."""

    def __init__(self, workdir: Path, *, port: int | None = None) -> None:
        binary = redis_server_path()
        if binary is None:
            raise FileNotFoundError("redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)")
        self.binary = binary
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.log_file = self.workdir / "redis.log"
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.start()

    def start(self) -> None:
        log = open(self.log_file, "ab")
        try:
            self.proc = subprocess.Popen(
                [
                    self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                    "--dir", str(self.workdir), "--save", "",
                    "--appendonly", "yes", "--appendfsync", "always",
                    "--protected-mode", "no", "--databases", "16",
                ],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        finally:
            log.close()
        self.wait_ready()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, db=db, socket_timeout=5, socket_connect_timeout=2)

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log_file.read_text()[-2000:]}")
            try:
                if self.client().ping():
                    # loading the AOF answers LOADING errors, not PONG: ping succeeded = loaded
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} not ready in {timeout:.0f} s")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)

    def restart(self, *, down_for_s: float = 1.0, sig: int = signal.SIGKILL) -> None:
        """Crash (SIGKILL by default) and come back on the same port with the same data."""
        self.kill(sig)
        time.sleep(down_for_s)
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def __enter__(self) -> "PersistentRedis":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def worker_env(**overrides: object) -> dict[str, str]:
    """``MEMORY_*`` variables for a worker, from keyword names (``claim_lease_s=5``)."""
    return {f"MEMORY_{k.upper()}": str(v) for k, v in overrides.items()}


def start_worker(
    *,
    broker_url: str,
    store_url: str,
    log_file: Path,
    queues: Iterable[str] = ALL_QUEUES,
    concurrency: int = 2,
    app: str = "workers.app",
    env: Mapping[str, str] | None = None,
    loglevel: str = "INFO",
    ready_timeout: float = 90.0,
) -> WorkerProcess:
    broker_db = int(broker_url.rsplit("/", 1)[1])
    backend = broker_url.rsplit("/", 1)[0] + f"/{broker_db + 1}"
    worker = WorkerProcess(
        broker_url=broker_url, result_backend=backend, store_url=store_url, log_file=log_file,
        queues=queues, pool="prefork", concurrency=concurrency, app=app, loglevel=loglevel,
        extra_env=dict(env or {}), cwd=REPO_ROOT,
    )
    try:
        return worker.wait_ready(timeout=ready_timeout)
    except Exception:
        worker.stop()
        raise


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def queues_idle(client, queues: Iterable[str] = ALL_QUEUES) -> bool:
    """No message waiting in any queue and none delivered but unacked."""
    try:
        waiting = sum(client.llen(q) for q in queues)
        unacked = client.hlen("unacked")
    except Exception:  # noqa: BLE001 - a restarting broker is not idle
        return False
    return waiting == 0 and unacked == 0


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def child_pids(pid: int) -> list[int]:
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(p) for p in out.split()]


def crash_lines(log_text: str) -> list[str]:
    """Lines of a worker log that show a crash: an unhandled error, a lost pool process."""
    markers = ("Traceback (most recent call last)", "WorkerLostError", "raised unexpected", "Unrecoverable error")
    return [line for line in log_text.splitlines() if any(m in line for m in markers)]


def env_without_keys() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)
    return env


def producer_app(broker_url: str, **settings: object):
    """A Celery app built like ``workers.app`` but pointed at ``broker_url`` (for publishing
    from the harness process); the process-wide settings are left as they were."""
    from schemas.settings import get_settings
    from workers.app import create_app

    overrides = {"MEMORY_BROKER_URL": broker_url, "MEMORY_RESULT_BACKEND": broker_url, **worker_env(**settings)}
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)
    get_settings.cache_clear()
    try:
        return create_app()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()


class Supervisor:
    """Keeps one worker running, as a container restart policy would: a worker that exited
    on its own is counted as a crash and started again."""

    def __init__(self, start: Callable[[int], WorkerProcess], poll_s: float = 0.5) -> None:
        import threading

        self._start = start
        self._generation = 0
        self.worker = start(self._generation)
        self.dead: list[WorkerProcess] = []
        self.crashes = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, args=(poll_s,), name="supervisor", daemon=True)
        self._thread.start()

    def _watch(self, poll_s: float) -> None:
        while not self._stop.wait(poll_s):
            with self._lock:
                if self._stop.is_set() or self.worker.is_alive():
                    continue
                self.crashes += 1
                self.dead.append(self.worker)
                self._generation += 1
                self.worker = self._start(self._generation)

    def replace(self) -> WorkerProcess:
        """Stop the current worker on purpose (not a crash) and start a fresh one."""
        with self._lock:
            self.worker.stop()
            self.dead.append(self.worker)
            self._generation += 1
            self.worker = self._start(self._generation)
            return self.worker

    def reasons(self) -> list[str]:
        out = []
        for worker in self.dead:
            lines = [line for line in worker.log_text().splitlines() if "Unrecoverable error" in line or "CRITICAL" in line]
            out.extend(line[:240] for line in lines)
        return out

    def stop(self) -> None:
        """Stop watching and kill the current worker: call it once the figures are taken."""
        self._stop.set()
        self._thread.join(timeout=10)
        with self._lock:
            self.worker.discard()
