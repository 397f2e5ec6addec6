"""The ``memoryctl`` lines of "Run it without Docker" (docs/operations.md) run as written against a
real redis-server and one real worker per queue class, on a store outside the repository."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from testkit.procs import REPO_ROOT
from pipeline import names

pytestmark = pytest.mark.integration

WORKER_ENV = {"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"}


def quickstart_memoryctl_lines() -> list[list[str]]:
    page = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = page.split("## Run it without Docker", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("memoryctl ")]


def test_the_quickstart_has_the_steps_an_operator_needs():
    lines = quickstart_memoryctl_lines()
    assert [line[1] for line in lines] == ["create-indexes", "replay", "runs", "context"]
    # formation goes on after the events are stored: the block waits for it before reading
    assert "--wait" in lines[1] and "--wait" in lines[2]


def test_the_quickstart_memoryctl_lines_run_as_written(tmp_path, broker_urls, celery_worker_process):
    store_url = f"sqlite:///{tmp_path / 'runtime' / 'memory.db'}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMORY_") and k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env.update(WORKER_ENV, MEMORY_BROKER_URL=broker_urls[0], MEMORY_STORE_URL=store_url,
               PYTHONPATH=str(REPO_ROOT))

    def memoryctl(args: list[str]) -> subprocess.CompletedProcess:
        # the page's paths are relative to the repository, like its shell session
        done = subprocess.run([sys.executable, "-m", "ops.cli", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 0, f"memoryctl {shlex.join(args)}: {done.stderr}{done.stdout}"
        assert f"store: {store_url}" in done.stderr
        return done

    lines = quickstart_memoryctl_lines()
    memoryctl(lines[0][1:])  # create-indexes, before any worker starts (as the compose file does)
    for queue in names.QUEUES:
        celery_worker_process(store_url=store_url, queues=(queue,), concurrency=1, extra_env=WORKER_ENV,
                              hostname=f"{queue}@quickstart", wait=False)
    # the lines one after the other, as a shell runs them: nothing waits but what they say
    for line in lines[1:]:
        out = memoryctl(line[1:]).stdout
        if line[1] == "replay":
            assert "rejected lines: 0" in out and "NOT YET INGESTED" not in out
        if line[1] == "runs":
            statuses, leftovers = _formation_state(store_url)   # read at once, in this process
            assert statuses and set(statuses.values()) == {"done"}, statuses
            assert not leftovers
            assert " done " in out and "extract_facts" in out
        if line[1] == "context":
            assert out.startswith("<MemoryContext") and "Maya Chen moved from Lisbon to Porto" in out
            assert "<Consolidated>" in out   # the session ends were consolidated before the read
    # the same file again changes nothing: its messages and its session ends are duplicates
    again = memoryctl(next(line for line in lines if line[1] == "replay")[1:]).stdout
    assert "accepted: 0" in again and "rejected lines: 0" in again, again


def _formation_state(store_url: str) -> tuple[dict[str, str], dict[str, int]]:
    """The status of every run, and the unabsorbed reflections per scope key (every session of
    the sample ended, so its reflections are all consolidated once formation is done)."""
    from pipeline.store import open_store
    from schemas.settings import Settings

    store = open_store(Settings(_env_file=None, store_url=store_url))
    try:
        statuses = {r.run_id: r.status for r in store.runs.list_runs(limit=1000)}
        keys = ["agent", "user:user-maya", "user:user-tom", "user:user-priya",
                *(f"session:{s}" for s in ("s1-maya-intro", "s2-launch-team", "s3-maya-followup", "s4-tom-av"))]
        return statuses, {k: n for k, n in store.reflections.count_unabsorbed("agent-juniper", keys).items() if n}
    finally:
        store.close()
