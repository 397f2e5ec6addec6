"""``memoryctl runs``, ``replay-failed`` and ``reembed``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import get_args

from ops.commands import positive_float, positive_int
from schemas.documents import RunStatus
from schemas.settings import get_settings


def _store():
    from ops.stores import open_existing

    return open_existing(get_settings())


#: formation is taken as done once nothing is pending this long: an ingest claims its run,
#: and a finished run sends its session's consolidation, a few milliseconds after the store
#: shows the step before
SETTLE_S = 1.5
POLL_S = 0.5


def warn_of_model_shutdowns() -> None:
    """A line on stderr for each configured model its provider shuts down within 60 days."""
    from pipeline.clock import Clock
    from pipeline.llm.lifecycle import warnings

    for line in warnings(get_settings(), Clock().now().date()):
        print(f"warning: {line}", file=sys.stderr)


def _runs(args: argparse.Namespace) -> int:
    from ops.runs import format_run
    from usecases.runs import list_run_summaries

    warn_of_model_shutdowns()
    store = _store()
    try:
        pending = _wait(store, args) if args.wait else []
        rows = list_run_summaries(
            store, status=args.status, agent_id=args.agent, session_id=args.session, limit=args.limit
        )
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, sort_keys=True))
    else:
        for row in rows:
            print(format_run(row))
        print(f"{len(rows)} run(s)")
    for line in pending:
        print(f"memoryctl runs: still pending after {args.timeout:g} s: {line}", file=sys.stderr)
    return 1 if pending else 0


def _wait(store, args: argparse.Namespace) -> list[str]:
    """Wait until formation has nothing pending (``usecases.runs.formation_pending``) for
    ``SETTLE_S``, or ``--timeout`` passed; returns what is still pending."""
    from usecases.runs import formation_pending

    deadline = time.monotonic() + args.timeout
    quiet_since: float | None = None
    said = ""
    while True:
        pending = formation_pending(store, agent_id=args.agent, session_id=args.session)
        now = time.monotonic()
        if pending:
            quiet_since = None
            if not args.json and pending[0] != said:
                said = pending[0]
                more = f" (and {len(pending) - 1} more)" if len(pending) > 1 else ""
                print(f"waiting: {said}{more}", file=sys.stderr)
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= SETTLE_S:
            return []
        if now >= deadline:
            return pending
        time.sleep(POLL_S)


def send_first_stage(run_id: str) -> None:
    from pipeline import names
    from workers.dispatch import send

    send(names.TASK_EXTRACT_FACTS, {"run_id": run_id})


def _replay(args: argparse.Namespace) -> int:
    from ops.broker import check_broker
    from usecases.runs import replay_failed
    from pipeline.clock import Clock

    settings = get_settings()
    check_broker(settings)
    store = _store()
    try:
        result = replay_failed(
            store, Clock().now(), settings.claim_lease_s, send_first_stage,
            agent_id=args.agent, run_ids=args.run or None, limit=args.limit,
        ).report
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"replayed {len(result['replayed'])} run(s), skipped {len(result['skipped'])}")
        for run_id in result["replayed"]:
            print(f"  replayed {run_id}")
        for skipped in result["skipped"]:
            print(f"  skipped {skipped['run_id']}: {skipped['reason']}")
    return 1 if args.run and result["skipped"] else 0


def _reembed(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from usecases.runs import mismatch_warning, models_to_replace, reembed
    from pipeline.embeddings import open_embedder

    settings = get_settings()
    store = _store()
    try:
        embedder = open_embedder(settings)
        hint = f"MEMORY_EMBEDDING_PROVIDER={settings.resolved_embedding_provider()} in this shell"
        found = models_to_replace(store, embedder.model, args.agent)
        warning = mismatch_warning(embedder.model, found, hint)
        if warning:
            print(warning, file=sys.stderr)
        # the count just taken gives the bar its end (and an ETA); --json prints one object only
        with tqdm(total=sum(e["facts"] for e in found.values()), desc=f"re-embedding with {embedder.model}",
                  unit="fact", disable=args.json, file=sys.stderr) as bar:
            count = reembed(store, embedder, agent_id=args.agent, batch=args.batch, progress=bar.update)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"reembedded": count, "model": embedder.model, "warning": warning}))
    else:
        print(f"re-embedded {count} fact(s) with {embedder.model}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list formation runs: status, stage timings, tokens and errors")
    p.add_argument("--status", choices=list(get_args(RunStatus)),
                   help="erased: a user or session of the run was erased while it ran; it applied nothing after that")
    p.add_argument("--agent")
    p.add_argument("--session")
    p.add_argument("--limit", type=positive_int, default=50)
    p.add_argument("--wait", action="store_true",
                   help="first wait until formation is done: no run claimed or running, no ended session "
                   "still to form or consolidate (exit 1 naming what is pending after --timeout)")
    p.add_argument("--timeout", type=positive_float, default=300.0, help="seconds --wait may take (default 300)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=_runs)

    p = sub.add_parser("replay-failed", help="re-enqueue failed and dead runs (attempts reset)")
    p.add_argument("--agent", help="only this agent's runs")
    p.add_argument("--run", action="append", help="only this run id (repeatable)")
    p.add_argument("--limit", type=positive_int, default=1000)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_replay)

    p = sub.add_parser("reembed", help="re-embed facts whose embedding model is not the current one")
    p.add_argument("--agent", help="only this agent's facts")
    p.add_argument("--batch", type=positive_int, default=64)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_reembed)
