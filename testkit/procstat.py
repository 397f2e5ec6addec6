"""What a process holds, read from Linux's /proc: resident memory and open file handles."""

from __future__ import annotations

import os


def open_handles(pid: int) -> int | None:
    """Open file descriptors of ``pid`` (None once it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def handles_on(pid: int, suffix: str) -> int | None:
    """Open descriptors of ``pid`` whose target path contains ``suffix`` (a database file)."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    count = 0
    for name in names:
        try:
            if suffix in os.readlink(f"/proc/{pid}/fd/{name}"):
                count += 1
        except OSError:
            continue  # closed meanwhile
    return count


def rss_mb(pid: int, kind: str = "VmRSS") -> float | None:
    """Resident set size of ``pid`` in MB (None once it is gone). ``kind="RssAnon"`` counts
    only anonymous memory (the heap): SQLite's memory-mapped reads are file pages, counted in
    ``VmRSS`` as the database grows, reclaimable and shared with the page cache."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"{kind}:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None
