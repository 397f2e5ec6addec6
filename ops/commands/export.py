"""``memoryctl export-user``: everything stored about a person, as JSON Lines
(``pipeline.export``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

from schemas.settings import get_settings

#: seconds between two progress lines on a terminal
PROGRESS_EVERY_S = 1.0


def _run(args: argparse.Namespace) -> int:
    from ops.stores import open_existing
    from usecases.export import records
    from pipeline.forgetting import check_ids

    check_ids(args.user, args.agent)
    show = not args.json and sys.stderr.isatty()
    counts: dict[str, int] = {}
    store = open_existing(get_settings())
    try:
        with (open(args.out, "w", encoding="utf-8") if args.out else contextlib.nullcontext(sys.stdout)) as out:
            last = time.monotonic()
            for record in records(store, args.user, args.agent):
                out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                counts[record["kind"]] = counts.get(record["kind"], 0) + 1
                if show and time.monotonic() - last >= PROGRESS_EVERY_S:
                    last = time.monotonic()
                    print(f"export-user: {sum(counts.values())} records ...", file=sys.stderr, flush=True)
    finally:
        store.close()
    summary = {"user": args.user, "agent": args.agent, "out": args.out, "records": counts}
    where = sys.stdout if args.out else sys.stderr  # stdout holds the records when no --out
    if args.json:
        print(json.dumps(summary, sort_keys=True), file=where)
    else:
        total = sum(counts.values())
        detail = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing stored about this user"
        print(f"exported {total} records of user {args.user}{' to ' + args.out if args.out else ''}: {detail}",
              file=where)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-user", help="everything stored about a person (messages, facts with history, reflections, blob "
                            "sections, run costs), as JSON Lines",
        description="Reads only what rests on the user (provenance indexes). Leaves out other people's messages "
        "and memory, embeddings and run stage outputs; see docs/operations.md \"Exporting a user's data\".",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--agent", help="only under this agent (default: every agent)")
    p.add_argument("--out", help="write the records to this file (default: stdout)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object, and no progress")
    p.set_defaults(func=_run)
