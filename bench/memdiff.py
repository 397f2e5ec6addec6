"""What grew between two heap snapshots of one process (``workers.memtrace``).

    python -m bench.memdiff DIR/1234-2.snap DIR/1234-9.snap [--top 25] [--frames 8]

Prints the allocation sites whose live size grew most, with their call stacks, and then the
difference of the two descriptor listings written beside the snapshots (``.fds``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

_NOISE = (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
          tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"), tracemalloc.Filter(False, "<unknown>"))


def _fd_kinds(path: Path) -> Counter:
    """Open descriptors by target, with the inode numbers of sockets and pipes taken out."""
    if not path.exists():
        return Counter()
    kinds = Counter()
    for line in path.read_text().splitlines():
        target = line.partition(" ")[2]
        kinds[target.split(":[")[0] + ":" if ":[" in target else target] += 1
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memdiff", description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--frames", type=int, default=8, help="frames shown per site")
    parser.add_argument("--key", default="traceback", choices=("traceback", "lineno", "filename"))
    args = parser.parse_args(argv)
    for path in (args.old, args.new):
        if not path.is_file():
            parser.error(f"{path}: no such snapshot (workers.memtrace writes DIR/<pid>-<n>.snap)")
    old = tracemalloc.Snapshot.load(str(args.old)).filter_traces(_NOISE)
    new = tracemalloc.Snapshot.load(str(args.new)).filter_traces(_NOISE)
    total_old = sum(s.size for s in old.statistics("filename"))
    total_new = sum(s.size for s in new.statistics("filename"))
    print(f"traced: {total_old / 2**20:.2f} MB -> {total_new / 2**20:.2f} MB ({(total_new - total_old) / 2**20:+.2f} MB)")
    for stat in new.compare_to(old, args.key)[: args.top]:
        print(f"\n{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks  (now {stat.size / 1024:.1f} KiB in {stat.count})")
        for line in stat.traceback.format(limit=args.frames, most_recent_first=True):
            print("    " + line)
    mall_old, mall_new = (json.loads(p.with_suffix(".malloc").read_text()) if p.with_suffix(".malloc").exists() else {}
                          for p in (args.old, args.new))
    if mall_old and mall_new:
        print("\nallocator (MB): " + ", ".join(
            f"{k} {mall_old[k] / 2**20:.1f} -> {mall_new[k] / 2**20:.1f}" for k in
            ("arena", "hblkhd", "uordblks", "fordblks", "anon_brk", "anon_1mib_maps", "anon_other",
             "traced", "tracemalloc_overhead") if k in mall_old)
            + f", threads {mall_old.get('threads')} -> {mall_new.get('threads')}")
    fds_old, fds_new = _fd_kinds(args.old.with_suffix(".fds")), _fd_kinds(args.new.with_suffix(".fds"))
    if fds_old or fds_new:
        print(f"\nopen descriptors: {sum(fds_old.values())} -> {sum(fds_new.values())}")
        for target in sorted(set(fds_old) | set(fds_new)):
            if fds_old[target] != fds_new[target]:
                print(f"  {fds_old[target]:4d} -> {fds_new[target]:4d}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
