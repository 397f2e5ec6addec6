"""``MEMORY_TRACEMALLOC_DIR`` makes a worker process write heap snapshots, descriptor listings
and allocator figures, and ``bench.memdiff`` compares two of them (the soak's diagnostic)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from testkit.procs import REPO_ROOT

_PROCESS = textwrap.dedent("""
    import time
    from workers import memtrace
    assert memtrace.start()
    kept = []
    for _ in range(30):
        kept.append(bytearray(200_000))  # grows between two snapshots
        time.sleep(0.05)
    time.sleep(0.6)
""")


def test_a_traced_process_writes_snapshots_that_memdiff_compares(tmp_path):
    env = {**os.environ, "MEMORY_TRACEMALLOC_DIR": str(tmp_path), "MEMORY_TRACEMALLOC_EVERY_S": "0.5",
           "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", _PROCESS], env=env, check=True, timeout=60, cwd=REPO_ROOT)
    snaps = sorted(tmp_path.glob("*.snap"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(snaps) >= 2
    figures = json.loads(snaps[-1].with_suffix(".malloc").read_text())
    assert figures["traced"] > 0 and figures["anon_brk"] + figures["anon_other"] > 0
    assert any(" pipe:" in line or " /" in line for line in snaps[-1].with_suffix(".fds").read_text().splitlines())

    diff = subprocess.run([sys.executable, "-m", "bench.memdiff", str(snaps[0]), str(snaps[-1]), "--top", "3"],
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert diff.returncode == 0, diff.stderr
    assert "<string>" in diff.stdout and "KiB" in diff.stdout  # the growing list, by its line
    assert "open descriptors:" in diff.stdout or "allocator (MB)" in diff.stdout

    missing = subprocess.run([sys.executable, "-m", "bench.memdiff", str(tmp_path / "nope.snap"), str(snaps[-1])],
                             capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert missing.returncode == 2 and "no such snapshot" in missing.stderr and "Traceback" not in missing.stderr
