"""Throwaway servers for integration tests and benchmarks: a real ``redis-server`` on a free
port and real ``celery worker`` processes, always cleaned up by their owner.

Nothing here is used in production; docker-compose runs the real stack.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_redis_server() -> None:
    """Skip the test when redis-server is missing, or fail it when CI is set: tests on real
    processes may skip on a laptop, never in CI."""
    if redis_server_path() is None:
        import pytest

        if os.environ.get("CI"):
            pytest.fail("redis-server is required in CI (env CI is set); install it (apt-get install redis-server)")
        pytest.skip("redis-server is not installed; the tests on a real redis-server run in CI")


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


class _ServerProcess:
    """A server process (``self.proc``, logging to ``self._log``) stopped on leaving a ``with``
    block: SIGTERM, then SIGKILL if it has not exited within 10 s."""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer(_ServerProcess):
    """A ``redis-server`` with no persistence, in its own directory, on a free port.

    With ``tls`` (``testkit.tls.TLSFiles``) it serves TLS only (``--tls-port``; the plain
    port is off) and ``url()`` is a ``rediss://`` URL; ``extra_args`` go on its command line
    (``--replicaof``)."""

    def __init__(self, workdir: Path, *, databases: int = 256, tls=None, extra_args: Iterable[str] = ()) -> None:
        binary = redis_server_path()
        if binary is None:
            raise FileNotFoundError(
                "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)"
            )
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.tls = tls
        self.log_file = self.workdir / "redis.log"
        self._log = open(self.log_file, "ab")
        ports = ["--port", str(self.port)] if tls is None else [
            "--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(tls.cert),
            "--tls-key-file", str(tls.key), "--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(
            [
                binary, *ports, "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
                "--databases", str(databases), "--protected-mode", "no", *extra_args,
            ],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._wait_ready()

    @property
    def base_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}" if self.tls is None else f"rediss://localhost:{self.port}"

    def url(self, db: int = 0) -> str:
        return f"{self.base_url}/{db}"

    def client(self, db: int = 0):
        import redis

        tls = {} if self.tls is None else {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}
        host = "127.0.0.1" if self.tls is None else "localhost"
        return redis.Redis(host=host, port=self.port, db=db, socket_timeout=10, socket_connect_timeout=5, **tls)

    def _ping(self) -> bool:
        if self.tls is not None:
            import redis

            try:
                return bool(self.client().ping())
            except redis.exceptions.RedisError:
                return False
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {self.log_file.read_text()[-2000:]}")
            try:
                if self._ping():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer PING on port {self.port} within {timeout:.0f} s")


class RedisSentinel(_ServerProcess):
    """A Redis Sentinel (``redis-server CONF --sentinel``) on a free port, watching
    ``master`` under ``master_name`` with a quorum of 1."""

    def __init__(self, workdir: Path, master: RedisServer, *, master_name: str = "mymaster") -> None:
        binary = redis_server_path()
        if binary is None:
            raise FileNotFoundError("redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.master_name = master_name
        conf = self.workdir / "sentinel.conf"  # the sentinel rewrites it: its own file
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.workdir}\n"
            f"sentinel monitor {master_name} 127.0.0.1 {master.port} 1\n"
            f"sentinel down-after-milliseconds {master_name} 1000\n"
            f"sentinel failover-timeout {master_name} 5000\n")
        self.log_file = self.workdir / "sentinel.log"
        self._log = open(self.log_file, "ab")
        self.proc = subprocess.Popen([binary, str(conf), "--sentinel"], stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"sentinel://127.0.0.1:{self.port}"

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=5)

    def master_port(self) -> int:
        host, port = self.client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
        return int(port)

    def _wait_ready(self, timeout: float = 20.0) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis sentinel exited with {self.proc.returncode}: {self.log_file.read_text()[-2000:]}")
            try:
                self.master_port()
                return
            except (redis.exceptions.RedisError, TypeError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis sentinel did not name its master within {timeout:.0f} s")



class WorkerProcess:
    """A real ``celery -A workers.app worker`` subprocess in its own process group.

    ``stop()`` asks for a warm shutdown (SIGTERM) and kills what is left; ``kill(sig)`` sends a
    signal to the main process only (crash tests), ``kill_group`` to it and its pool children.
    """

    def __init__(
        self,
        *,
        broker_url: str,
        result_backend: str,
        store_url: str,
        log_file: Path,
        queues: Iterable[str] = ("ingest",),
        pool: str = "prefork",
        concurrency: int = 2,
        app: str = "workers.app",
        loglevel: str = "INFO",
        hostname: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Iterable[str] = (),
        events: bool = True,
        cwd: Path | None = None,
    ) -> None:
        self.broker_url = broker_url
        self.result_backend = result_backend
        self.store_url = store_url
        self.log_file = Path(log_file)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.queues = list(queues)
        self.hostname = hostname or f"w{free_port()}@%h"
        self.loglevel = loglevel
        env = dict(os.environ)
        env.update(
            {
                "MEMORY_BROKER_URL": broker_url,
                "MEMORY_RESULT_BACKEND": result_backend,
                "MEMORY_STORE_URL": store_url,
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
                ),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(extra_env or {})
        self.env = env
        cmd = [
            sys.executable, "-m", "celery", "-A", app, "worker",
            "-Q", ",".join(self.queues), "--pool", pool, "-c", str(concurrency),
            "-n", self.hostname, "-l", loglevel, "--without-gossip", "--without-mingle",
        ]
        if events:
            cmd.append("-E")
        cmd.extend(extra_args)
        self.cmd = cmd
        self._log = open(self.log_file, "ab")
        self.proc = subprocess.Popen(
            cmd, cwd=str(cwd or REPO_ROOT), env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def is_alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 90.0) -> "WorkerProcess":
        """Until the worker logs "ready." (or answers a ping when its log level hides that).

        A ping opens broker connections in this process: start producer processes after it
        with the ``spawn`` start method, never ``fork``."""
        deadline = time.monotonic() + timeout
        next_ping = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not self.is_alive():
                raise RuntimeError(
                    f"celery worker exited with {self.proc.returncode} before it was ready; "
                    f"log {self.log_file}:\n{self.log_text()[-4000:]}"
                )
            if " ready." in self.log_text():
                return self
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + 1.0
                if self.ping():
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"celery worker not ready within {timeout:.0f} s; log:\n{self.log_text()[-4000:]}")

    def ping(self, timeout: float = 1.0) -> bool:
        from celery import Celery

        probe = Celery("probe", broker=self.broker_url)
        try:
            replies = probe.control.ping(timeout=timeout)
        except Exception:  # noqa: BLE001 - not reachable yet means "not ready"
            return False
        finally:
            probe.close()
        host = self.hostname.split("@")[0]
        return any(name.split("@")[0] == host for reply in replies for name in reply)

    def wait_for_log(self, text: str, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_text():
                return True
            time.sleep(0.1)
        return False

    def child_pids(self) -> list[int]:
        """Pids of the pool processes (Linux /proc)."""
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            return []

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the main worker process only."""
        if self.is_alive():
            os.kill(self.pid, sig)

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def discard(self) -> int | None:
        """SIGKILL the worker and its pool at once, for a teardown after the test's assertions:
        nothing checks a warm shutdown there, and one takes about 2.5 s (a test that checks the
        shutdown calls ``stop()`` itself)."""
        self.kill_group(signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode

    def stop(self, timeout: float = 20.0) -> int | None:
        """Warm shutdown, then SIGKILL to whatever of the process group is left."""
        if self.is_alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        return self.discard()
