"""The README's "Wire it into your agent" block runs as written, right after ``make demo``, with
the command the README gives beside it: on the demo's store, a worker in the same process
forms what the block publishes, ``wait`` returns once it is formed, and the block's last two
lines (read the context, search the facts) show what the user said, on the first run."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from testkit.demo_store import demo_env, formed_demo_store
from testkit.procs import REPO_ROOT


def _section() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Wire it into your agent", 1)[1].split("\n## ", 1)[0]


def readme_block() -> str:
    return re.search(r"```python\n(.*?)```", _section(), re.S).group(1)


def readme_command() -> tuple[dict[str, str], list[str]]:
    """The settings and the argv of the command the README runs the block with."""
    line = re.search(r"```sh\n(.*?)\n```", _section(), re.S).group(1).strip()
    words = shlex.split(line)
    settings = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    return settings, [w for w in words if not re.match(r"^[A-Z_]+=", w)]


def test_the_block_is_the_short_quick_start_the_readme_promises():
    block = readme_block()
    assert len(block.splitlines()) <= 10
    for call in ("maybe_form_memories", "on_session_end", "wait", "get_memory_context", "search_facts"):
        assert f"memory.{call}(" in block
    settings, argv = readme_command()
    assert settings == {"MEMORY_STORE_URL": "sqlite:///.runtime/demo.db", "MEMORY_BROKER_URL": "memory://"}
    assert argv == [".venv/bin/python", "agent.py"]


def test_right_after_make_demo_the_block_runs_as_written_and_shows_formed_memory(tmp_path_factory, tmp_path):
    formed = formed_demo_store(tmp_path_factory)
    (tmp_path / ".runtime").mkdir()
    for suffix in ("", "-wal"):  # the demo's store where make demo leaves it, beside the checkout's .venv
        if Path(f"{formed}{suffix}").exists():
            shutil.copy(f"{formed}{suffix}", tmp_path / ".runtime" / f"demo.db{suffix}")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / "agent.py").write_text(readme_block() + "\nprint(repr(xml)); print(repr(hits))\n", encoding="utf-8")
    settings, argv = readme_command()

    done = subprocess.run(argv, cwd=tmp_path, env=demo_env(**settings), capture_output=True, text=True, timeout=180)

    assert done.returncode == 0, done.stderr[-3000:]
    xml, hits = done.stdout.strip().splitlines()[-2:]
    assert "Porto" in xml and "Porto" in hits, done.stdout[-3000:] + done.stderr[-3000:]
