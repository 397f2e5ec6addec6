"""The README's "Wire it into your agent" block runs as written against a real redis-server and
real workers: the events it publishes are formed, and its last two lines (read the context,
search the facts) then return what the user said."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from pipeline import names
from testkit.procs import REPO_ROOT

OFFLINE = {"MEMORY_LLM_PROVIDER": "offline", "MEMORY_EMBEDDING_PROVIDER": "hashing"}


def readme_block() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Wire it into your agent", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_block_is_the_short_quick_start_the_readme_promises():
    block = readme_block()
    assert len(block.splitlines()) <= 10
    for call in ("maybe_form_memories", "on_session_end", "get_memory_context", "search_facts"):
        assert f"memory.{call}(" in block


def test_the_readme_agent_quick_start_runs_and_then_reads_what_was_said(tmp_path, broker_urls, celery_worker_process):
    store_url = f"sqlite:///{tmp_path / 'memory.db'}"
    worker = celery_worker_process(
        store_url=store_url, concurrency=3, extra_env=OFFLINE,
        queues=(names.QUEUE_INGEST, names.QUEUE_FORMATION, names.QUEUE_CONSOLIDATION, names.QUEUE_MAINTENANCE))
    env = {**worker.env, "PYTHONPATH": str(REPO_ROOT)}
    script = readme_block() + "\nprint(repr(xml)); print(repr(hits))\n"

    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]

    # formation runs on after the block returns: read again, as the agent does before each reply
    deadline, last = time.monotonic() + 90, done.stdout
    while "Porto" not in last and time.monotonic() < deadline:
        time.sleep(1)
        again = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-3000:]
        last = again.stdout
    xml, hits = last.strip().splitlines()[-2:]
    assert "Porto" in xml, f"{last}\n{worker.log_text()[-3000:]}"
    assert "Porto" in hits
