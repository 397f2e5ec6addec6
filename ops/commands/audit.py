"""``memoryctl audit``: who erased, edited, exported, switched, replayed or changed keys, and
when (design §12). Entries name a credential id and a pseudonym of the subject, never content.

    memoryctl audit [--since 7d] [--action forget_user] [--limit 100] [--json]
"""

from __future__ import annotations

import argparse
import json

from ops.commands import positive_int
from ops.commands.cost import bound_at, time_bound


def _audit(args: argparse.Namespace) -> int:
    from ops.stores import open_existing
    from pipeline.clock import Clock
    from schemas.settings import get_settings
    from usecases.audit import read_log

    since = bound_at(args.since, Clock().now())
    store = open_existing(get_settings())
    try:
        entries = read_log(store.access, since=since, action=args.action, limit=args.limit)
    finally:
        store.close()
    rows = [e.model_dump(mode="json", exclude={"audit_id"}) for e in entries]
    if args.json:
        print(json.dumps(rows, sort_keys=True))
        return 0
    for r in rows:
        counts = " ".join(f"{k}={v}" for k, v in sorted(r["counts"].items()))
        print(f"{r['at']}  {r['action']:<18}  {r['credential_kind']:<5} {r['credential_id']:<28}  "
              f"{r['agent_id'] or '*':<16}  {r['outcome']:<7} {counts}".rstrip())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from typing import get_args

    from schemas.access import AuditAction

    p = sub.add_parser("audit", help="the audit log: erasures, edits, exports, switches, replays, key changes")
    p.add_argument("--since", type=time_bound, help="only the last 7d, 12h, 30m, ... or since an ISO date or time")
    p.add_argument("--action", choices=sorted(get_args(AuditAction)))
    p.add_argument("--limit", type=positive_int, default=100)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_audit)
