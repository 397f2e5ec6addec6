"""``memoryctl publish | end-session | replay``: the producer's command line (SPEC §3).

``replay FILE.jsonl`` validates every line locally first (bad lines are reported with their
line number, field and reason, and never stop the replay), drops events repeated inside the
file (same ``event_id``, or same session and ``message_id``), and publishes the rest in
batches. Without ``--wait``, "accepted" means the broker holds the event.

With ``--wait`` it then watches the store until every published event has an outcome:
per session of the file, the growth of its stored messages (accepted) plus the growth of its
``duplicates`` counter (already stored: a store-level duplicate) must reach the number of
messages published for it; rejections the worker recorded for the published event ids count
as rejected. Other producers writing the same sessions at the same time blur these counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import InvalidInput
from schemas.events import MessageAdded, Rejection, parse_event
from schemas.settings import get_settings


def _publisher():
    from ops.stores import announce
    from workers.producer import default_publisher

    announce("broker", get_settings().broker_url)
    return default_publisher()


def _store():
    from ops.stores import open_existing

    return open_existing(get_settings())


# ---------------------------------------------------------------------- publish / end-session
def _publish(args: argparse.Namespace) -> int:
    from workers.producer import publish_message

    event_id = publish_message(
        publisher=_publisher(),
        agent_id=args.agent, session_id=args.session, role=args.role, sender_id=args.sender,
        sender_name=args.sender_name, content=args.content, message_id=args.message_id,
        event_id=args.event_id, created_at=args.created_at, agent_name=args.agent_name,
        session_users=args.users.split(",") if args.users else None, user_tier=args.tier,
        preview=args.preview,
    )
    print(event_id)
    return 0


def _end_session(args: argparse.Namespace) -> int:
    from workers.producer import end_session

    print(end_session(args.agent, args.session, event_id=args.event_id, ended_at=args.ended_at, publisher=_publisher()))
    return 0


# ---------------------------------------------------------------------- replay
@dataclass
class ReplayReport:
    lines: int = 0
    published: int = 0
    accepted: int = 0
    duplicates_in_file: int = 0
    duplicates_in_store: int = 0
    rejected: list[tuple[int, str, str]] = field(default_factory=list)  # (line, field, reason)
    waited: bool = False
    missing: int = 0  # published events with no outcome in the store when --wait gave up

    @property
    def duplicates(self) -> int:
        return self.duplicates_in_file + self.duplicates_in_store

    def render(self) -> str:
        dup = f"duplicate: {self.duplicates} ({self.duplicates_in_file} in the file"
        dup += f", {self.duplicates_in_store} already stored)" if self.waited else ")"
        lines = [
            f"{self.lines} lines, {self.published} events published",
            f"accepted: {self.accepted}   {dup}   rejected: {len(self.rejected)}",
        ]
        if not self.waited:
            lines.append("(accepted = held by the broker; --wait counts what the store shows)")
        if self.missing:
            lines.append(f"NOT YET INGESTED: {self.missing} published events had no outcome in the store")
        lines.extend(f"  line {n}: {f}: {reason}" for n, f, reason in self.rejected)
        return "\n".join(lines)


def _count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


def replay(path: Path, *, batch: int, wait: bool, timeout: float, publisher, store_factory=None,
           progress: bool = True) -> ReplayReport:
    """Validate, de-duplicate and publish a JSONL file; see the module docstring."""
    from tqdm import tqdm

    if batch < 1:
        raise InvalidInput("--batch", "must be at least 1")
    settings = get_settings()
    report = ReplayReport()
    seen_events: set[str] = set()
    seen_messages: set[tuple[str, str]] = set()
    per_session: Counter[str] = Counter()   # messages published per session
    agents: dict[str, str] = {}
    line_of: dict[str, int] = {}  # event id -> line number, for worker-side rejections
    pending: list[dict] = []
    store = None
    before: dict[str, tuple[int, int]] = {}

    def flush() -> None:
        if pending:
            publisher.publish_batch(list(pending))
            report.published += len(pending)
            pending.clear()

    total = _count_lines(path)
    with path.open("rb") as fh, tqdm(total=total, unit="event", disable=not progress, file=sys.stderr) as bar:
        for number, line in enumerate(fh, 1):
            bar.update(1)
            report.lines = number
            if not line.strip():
                continue
            event = parse_event(line, max_message_bytes=settings.max_message_bytes)
            if isinstance(event, Rejection):
                report.rejected.extend((number, e.field, e.reason) for e in event.errors)
                continue
            message_key = (event.session_id, event.message.message_id) if isinstance(event, MessageAdded) else None
            if event.event_id in seen_events or (message_key and message_key in seen_messages):
                report.duplicates_in_file += 1
                continue
            seen_events.add(event.event_id)
            if message_key:
                seen_messages.add(message_key)
                if wait and event.session_id not in before:
                    store = store or (store_factory or _store)()
                    state = store.get_session(event.session_id)
                    before[event.session_id] = (
                        store.count_messages(event.session_id), state.duplicates if state else 0
                    )
                per_session[event.session_id] += 1
                agents[event.session_id] = event.agent_id
            line_of[event.event_id] = number
            pending.append(json.loads(line))
            if len(pending) >= batch:
                flush()
        flush()

    if not wait:
        report.accepted = report.published
        return report
    report.waited = True
    ended = report.published - sum(per_session.values())  # session.ended events: no counter
    try:
        deadline = time.monotonic() + timeout
        while True:
            accepted = dups = 0
            for session_id, expected in per_session.items():
                count0, dup0 = before[session_id]
                state = store.get_session(session_id) if store else None
                accepted += (store.count_messages(session_id) - count0) if store else 0
                dups += ((state.duplicates if state else 0) - dup0)
            remote = [r for r in store.list_rejections(limit=10_000) if r.event_id in line_of] if store else []
            outcomes = accepted + dups + len(remote)
            if outcomes >= sum(per_session.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        report.accepted = accepted + ended
        report.duplicates_in_store = dups
        report.missing = max(0, sum(per_session.values()) - outcomes)
        report.rejected.extend(
            (line_of[r.event_id], e.get("field", "?"), f"{e.get('reason')} (rejected by the worker)")
            for r in remote for e in r.errors
        )
    finally:
        if store is not None:
            store.close()
    return report


def _replay(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise InvalidInput("FILE", f"{path} is not a readable file")
    report = replay(path, batch=args.batch, wait=args.wait, timeout=args.timeout, publisher=_publisher())
    print(report.render())
    return 1 if report.missing else 0


def _rejected(args: argparse.Namespace) -> int:
    store = _store()
    try:
        rows = store.list_rejections(limit=args.limit)
    finally:
        store.close()
    for r in rows:
        if args.json:
            print(r.model_dump_json())
            continue
        reasons = "; ".join(f"{e.get('field')}: {e.get('reason')}" for e in r.errors)
        raw = r.raw if len(r.raw) <= 160 else r.raw[:157] + "..."
        print(f"{r.received_at:%Y-%m-%d %H:%M:%S} event={r.event_id} session={r.session_id}\n  {reasons}\n  raw: {raw}")
    return 0


# ---------------------------------------------------------------------- register
def register(sub) -> None:
    p = sub.add_parser("publish", help="publish one message.added event (fire-and-forget)")
    p.add_argument("--agent", required=True, help="agent id")
    p.add_argument("--session", required=True, help="session id")
    p.add_argument("--role", default="user", help="user, assistant, tool or system (default user)")
    p.add_argument("--sender", help="sender id (the human user; required for role user)")
    p.add_argument("--sender-name")
    p.add_argument("--content", required=True)
    p.add_argument("--message-id", help="default: the event id")
    p.add_argument("--event-id", help="idempotency key (default: a new UUID)")
    p.add_argument("--created-at", help="ISO 8601 (default: now)")
    p.add_argument("--agent-name")
    p.add_argument("--users", help="comma-separated humans of the session")
    p.add_argument("--tier", type=int, default=0, help="user tier: 0 free, >= 1 premium")
    p.add_argument("--preview", action="store_true")
    p.set_defaults(func=_publish)

    e = sub.add_parser("end-session", help="publish session.ended: form what is unformed, consolidate")
    e.add_argument("--agent", required=True)
    e.add_argument("--session", required=True)
    e.add_argument("--event-id")
    e.add_argument("--ended-at", help="ISO 8601 (default: when ingested)")
    e.set_defaults(func=_end_session)

    r = sub.add_parser("replay", help="validate and publish a JSONL file of events, with a progress bar")
    r.add_argument("file", metavar="FILE.jsonl")
    r.add_argument("--batch", type=int, default=100, help="events per queue message (default 100)")
    r.add_argument("--wait", action="store_true", help="wait until the store shows every outcome")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds --wait may take (default 300)")
    r.set_defaults(func=_replay)

    j = sub.add_parser("rejected", help="list rejected events, newest first, with their reasons")
    j.add_argument("--limit", type=int, default=20)
    j.add_argument("--json", action="store_true", help="one JSON document per line, raw payload included")
    j.set_defaults(func=_rejected)
