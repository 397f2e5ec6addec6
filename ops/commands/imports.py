"""``memoryctl import FILE``: JSON Lines into an agent's memory (``usecases.imports``): the
``export-user`` format or simple ``{user_id, text, categories?, expires_at?, import_key?}``
lines. Read in pieces, never whole; a progress bar on a terminal; each rejected line printed
as it is met (``line N: FIELD: why``), every good line kept. Audited as done by ``cli``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import BinaryIO

from pipeline.errors import InvalidInput

#: bytes read at a time
CHUNK_BYTES = 1 << 16
#: seconds between two redraws of the progress bar
PROGRESS_EVERY_S = 0.2


class _Progress:
    """A one-line bar on stderr, redrawn at most every ``PROGRESS_EVERY_S``: bytes read of the
    file's size (a pipe has none: lines only)."""

    def __init__(self, size: int | None) -> None:
        self.size, self.last, self.shown = size, 0.0, False

    def draw(self, done: int, lines: int, rejected: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < PROGRESS_EVERY_S:
            return
        self.last, self.shown = now, True
        if self.size:
            share = min(done / self.size, 1.0)
            bar = "#" * int(share * 30)
            head = f"[{bar:<30}] {share:4.0%} {done / 1e6:.1f}/{self.size / 1e6:.1f} MB"
        else:
            head = f"{done / 1e6:.1f} MB"
        print(f"\rimport {head}, {lines} lines, {rejected} rejected", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.shown:
            print(file=sys.stderr)
            self.shown = False


def _chunks(f: BinaryIO, progress: _Progress | None, importer) -> Iterator[bytes]:
    done = 0
    while chunk := f.read(CHUNK_BYTES):
        done += len(chunk)
        yield chunk
        if progress is not None:
            progress.draw(done, importer.line, importer.summary.rejected)
    if progress is not None:
        progress.draw(done, importer.line, importer.summary.rejected, force=True)


def _open(path: str) -> tuple[BinaryIO, int | None]:
    if path == "-":
        return sys.stdin.buffer, None
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise InvalidInput("FILE", f"cannot read {path}: {exc.strerror}") from None
    return f, os.fstat(f.fileno()).st_size or None


def _run(args: argparse.Namespace) -> int:
    from usecases.audit import CLI, recorded
    from ops.commands.curate import _deps
    from usecases.imports import Importer

    f, size = _open(args.file)
    deps = _deps()
    progress = _Progress(size) if not args.json and sys.stderr.isatty() else None
    try:
        importer = Importer(deps, args.agent, by="cli")

        def report(result) -> None:
            # a fact skipped says why (its key holds a retired fact); a skipped message is no news
            told = result.outcome == "rejected" or (result.outcome == "skipped" and result.kind == "fact")
            if told and not args.json:
                if progress is not None:
                    progress.close()   # the line on a line of its own; the bar is drawn again below it
                print(f"line {result.line}: {result.field or result.outcome}: {result.why}", flush=True)

        summary = importer.run(_chunks(f, progress, importer), report)
        if progress is not None:
            progress.close()
        recorded(deps.store.access, deps.clock.now(), CLI, importer)
    finally:
        if f is not sys.stdin.buffer:
            f.close()
        if "store" in deps.__dict__:
            deps.store.close()
    if args.json:
        print(json.dumps({"file": args.file, "agent": args.agent, "added": summary.added, "updated": summary.updated,
                          "unchanged": summary.unchanged, "exists": summary.exists,
                          "skipped": summary.skipped, "rejected": summary.rejected, "added_by_kind": summary.by_kind,
                          "rejects": [{"line": r.line, "field": r.field, "why": r.why} for r in summary.rejects],
                          "skips": [{"line": r.line, "why": r.why} for r in summary.skips]},
                         sort_keys=True))
    else:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(summary.by_kind.items())) or "nothing new"
        print(f"imported {args.file}: {summary.added} added ({kinds}), {summary.updated} updated, "
              f"{summary.unchanged} unchanged, {summary.exists} held by another item, {summary.skipped} skipped, "
              f"{summary.rejected} rejected")
    return 1 if summary.rejected else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import", help="import JSON Lines (export-user records, or {user_id, text} lines) into an agent's memory",
        description="Each good line is kept and each bad one printed (line number, field, why); importing the "
        "same file again changes nothing, and a line whose key holds another text updates that fact. See "
        "docs/owner.md \"Writing and importing memory\".",
    )
    p.add_argument("file", metavar="FILE", help="a .jsonl file, or - for standard input")
    p.add_argument("--agent", help="the agent to import into (export lines name theirs: default, their own; "
                                   "simple lines need it)")
    p.add_argument("--json", action="store_true", help="print the summary, rejects included, as one JSON object")
    p.set_defaults(func=_run)
