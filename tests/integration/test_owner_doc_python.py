"""docs/owner.md's Python example runs as written on a new store: it sets an instruction, a
pause, the category list and the filterable keys through the use cases, records each change in
the audit log, and writes a fact filed under a category with its metadata."""

from __future__ import annotations

import re
import subprocess
import sys

from pipeline.store.sqlite import SQLiteStore
from testkit.demo_store import demo_env
from testkit.procs import REPO_ROOT


def test_the_owner_page_python_example_changes_the_store_and_the_audit_log(tmp_path):
    page = (REPO_ROOT / "docs" / "owner.md").read_text(encoding="utf-8")
    section = page.split("\n### In Python\n", 1)[1].split("\n### ", 1)[0]
    (tmp_path / "example.py").write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'owner.db'}"

    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=demo_env(MEMORY_STORE_URL=url),
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == "['session:s1']"
    store = SQLiteStore.from_url(url)
    try:
        assert {e.action for e in store.access.list_audit(limit=10)} == {
            "instructions.set", "memory.pause", "categories.set", "metadata_keys.set"}
        [fact] = store.facts.list_facts("agent-juniper", "agent")
        assert (fact.content, fact.source, fact.categories, fact.metadata) == (
            "The venue closes at 23:00", "owner", ["projects"], {"project": "apollo"})
        assert fact.fact_id in done.stdout
    finally:
        store.close()
