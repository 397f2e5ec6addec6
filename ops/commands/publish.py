"""``memoryctl publish | end-session | replay | rejected``: the producer's command line (design §3).

``publish`` and ``end-session`` validate the event with the worker's model before sending it
(exit 2 naming the field); ``replay`` is ``ops.replay``; ``rejected`` lists what the workers
refused. Each accepts ``--json`` (one JSON document on stdout).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ops.commands import meta_dict, meta_pair, positive_float, positive_int
from ops.replay import RERUN_IS_SAFE, replay
from pipeline.errors import InvalidInput
from schemas.settings import get_settings

__all__ = ["replay"]


def _publisher():
    from ops.broker import publisher

    return publisher(get_settings())


def _store():
    from ops.stores import open_existing

    return open_existing(get_settings())


# ---------------------------------------------------------------------- publish / end-session
# event field -> the option that sets it, so an error names what the operator typed
_OPTION_OF = {
    "agent_id": "--agent", "session_id": "--session", "message.role": "--role", "message.sender_id": "--sender",
    "message.sender_name": "--sender-name", "message.content": "--content", "message.message_id": "--message-id",
    "event_id": "--event-id", "message.created_at": "--created-at", "agent_name": "--agent-name",
    "session_users": "--users", "user_tier": "--tier",
}


def _as_option(exc: InvalidInput) -> InvalidInput:
    field = exc.field
    if field in ("message", "<event>") and "sender_id" in exc.reason:
        field = "message.sender_id"  # a model-level rule about the sender
    option = "--meta" if field.startswith("metadata") else _OPTION_OF.get(field)
    return InvalidInput(f"{option} ({exc.field})", exc.reason) if option else exc


def _publish(args: argparse.Namespace) -> int:
    from workers.producer import publish_message

    try:
        event_id = publish_message(
            publisher=_publisher(),
            agent_id=args.agent, session_id=args.session, role=args.role, sender_id=args.sender,
            sender_name=args.sender_name, content=args.content, message_id=args.message_id,
            event_id=args.event_id, created_at=args.created_at, agent_name=args.agent_name,
            session_users=args.users.split(",") if args.users else None, user_tier=args.tier,
            preview=args.preview, metadata=meta_dict(args.meta),
        )
    except InvalidInput as exc:
        raise _as_option(exc) from None
    print(json.dumps({"event_id": event_id, "type": "message.added"}) if args.json else event_id)
    return 0


def _end_session(args: argparse.Namespace) -> int:
    from workers.producer import end_session

    event_id = end_session(args.agent, args.session, event_id=args.event_id, ended_at=args.ended_at,
                           publisher=_publisher())
    print(json.dumps({"event_id": event_id, "type": "session.ended"}) if args.json else event_id)
    return 0


# ---------------------------------------------------------------------- replay
def _replay(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise InvalidInput("FILE", f"{path} is not a readable file")
    report = replay(path, batch=args.batch, wait=args.wait, timeout=args.timeout, publisher=_publisher(),
                    progress=not args.json)
    print(json.dumps(report.as_json(), sort_keys=True) if args.json else report.render())
    if report.interrupted:
        return 130
    if report.missing or (report.rejected and not args.allow_rejected):
        return 1
    return 0


# ---------------------------------------------------------------------- rejected
def _rejected(args: argparse.Namespace) -> int:
    store = _store()
    try:
        rows = store.ingest.list_rejections(limit=args.limit)
    finally:
        store.close()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in rows], sort_keys=True))
        return 0
    for r in rows:
        reasons = "".join(f"\n  {e.get('field')}: {e.get('reason')}" for e in r.errors)
        raw = r.raw if len(r.raw) <= 160 else r.raw[:157] + "..."
        print(f"{r.received_at:%Y-%m-%d %H:%M:%S} rejection={r.rejection_id} agent={r.agent_id or '-'} "
              f"session={r.session_id or '-'} event={r.event_id or '-'}{reasons}\n  raw: {raw}")
    print(f"{len(rows)} rejected event{'' if len(rows) == 1 else 's'}"
          + (f" (the newest {args.limit}; --limit for more)" if len(rows) == args.limit else ""))
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
    p.add_argument("--meta", action="append", type=meta_pair, metavar="KEY=VALUE",
                   help="the message's metadata (repeat for more keys): VALUE is JSON when it is a number, "
                   "true/false or a quoted string (tier=2 the number, code='\"2\"' the string), else the text itself")
    p.add_argument("--json", action="store_true", help="print {event_id, type}")
    p.set_defaults(func=_publish)

    e = sub.add_parser("end-session", help="publish session.ended: form what is unformed, consolidate")
    e.add_argument("--agent", required=True)
    e.add_argument("--session", required=True)
    e.add_argument("--event-id")
    e.add_argument("--ended-at", help="ISO 8601 (default: when ingested)")
    e.add_argument("--json", action="store_true", help="print {event_id, type}")
    e.set_defaults(func=_end_session)

    r = sub.add_parser(
        "replay", help="validate and publish a JSONL file of events, with a progress bar",
        description="Lines are full events or the short form of publish_messages (with message_id or "
        f"event_id). Exit 1 when a line was rejected (unless --allow-rejected); on Ctrl-C, {RERUN_IS_SAFE}.",
    )
    r.add_argument("file", metavar="FILE.jsonl")
    r.add_argument("--batch", type=positive_int, default=100, help="events per queue message (default 100)")
    r.add_argument("--wait", action="store_true", help="wait until the store shows every outcome")
    r.add_argument("--timeout", type=positive_float, default=300.0, help="seconds --wait may take (default 300)")
    r.add_argument("--allow-rejected", action="store_true", help="exit 0 even when lines were rejected")
    r.add_argument("--json", action="store_true", help="print the report as one JSON object")
    r.set_defaults(func=_replay)

    j = sub.add_parser("rejected", help="list rejected events, newest first, with their reasons")
    j.add_argument("--limit", type=positive_int, default=20)
    j.add_argument("--json", action="store_true", help="print a JSON list, raw payloads included")
    j.set_defaults(func=_rejected)
