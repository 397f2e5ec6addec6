"""``memoryctl webhooks``: an agent's webhook subscriptions and their deliveries (design §13).

    memoryctl webhooks add --agent A --url URL --event fact.created [--event ...] [--content]
    memoryctl webhooks list [--agent A] [--json]
    memoryctl webhooks rotate SUBSCRIPTION_ID [--drop-old]
    memoryctl webhooks enable SUBSCRIPTION_ID
    memoryctl webhooks remove SUBSCRIPTION_ID
    memoryctl webhooks log [--agent A] [--subscription S] [--status failed] [--limit 50] [--json]
    memoryctl webhooks redeliver [DELIVERY_ID ...] [--failed --agent A]

A signing secret is shown once, when a subscription is made or its secret rotated. The
deliveries are sent by the maintenance worker; ``redeliver`` queues them again, due now.
"""

from __future__ import annotations

import argparse
import json
import sys

from ops.commands import positive_int
from schemas.webhooks import EVENT_KINDS


def _store():
    from ops.stores import open_existing
    from schemas.settings import get_settings

    return open_existing(get_settings())


def _audited(store, result):
    """The use case's result, its audit entry recorded as done by ``cli``."""
    from pipeline.clock import Clock
    from usecases.audit import CLI, recorded

    return recorded(store.access, Clock().now(), CLI, result)


def _owned(store, subscription_id: str):
    from pipeline.errors import InvalidInput
    from usecases.webhooks import owned

    sub = owned(store.webhooks, subscription_id, None)
    if sub is None:
        raise InvalidInput("SUBSCRIPTION_ID", f"no webhook subscription {subscription_id!r} (memoryctl webhooks list)")
    return sub


def _shown(sub, *, secret: bool) -> dict:
    row = sub.model_dump(mode="json", exclude={"secrets"})
    row["signing_secrets"] = len(sub.secrets)
    if secret:
        row["secret"] = sub.secrets[0]
    return row


def _print_secret(sub, what: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(_shown(sub, secret=True), sort_keys=True))
        return
    print(f"{what} {sub.subscription_id} of agent {sub.agent_id} -> {sub.url} ({', '.join(sub.events)}); "
          f"its signing secret, shown once:", file=sys.stderr)
    print(sub.secrets[0])


def _add(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from usecases.webhooks import subscribe

    store = _store()
    try:
        sub = _audited(store, subscribe(store.webhooks, args.agent, args.url, args.event, Clock().now(),
                                        include_content=args.content)).subscription
    finally:
        store.close()
    _print_secret(sub, "subscription", args.json)
    return 0


def _list(args: argparse.Namespace) -> int:
    from usecases.webhooks import listed

    store = _store()
    try:
        subs = listed(store.webhooks, args.agent)
    finally:
        store.close()
    if args.json:
        print(json.dumps([_shown(s, secret=False) for s in subs], sort_keys=True))
        return 0
    for s in subs:
        state = "on" if s.enabled else f"off ({s.disabled_reason})"
        content = "with content" if s.include_content else "ids only"
        print(f"{s.subscription_id}  {s.agent_id}  {s.url}  {','.join(s.events)}  {content}  {state}")
    if not subs:
        print("no webhook subscriptions (memoryctl webhooks add --agent A --url URL --event fact.created)",
              file=sys.stderr)
    return 0


def _changed(subscription_id: str, change):
    """Apply the use case ``change(webhooks, subscription, now)`` to a stored subscription, audited."""
    from pipeline.clock import Clock

    store = _store()
    try:
        return _audited(store, change(store.webhooks, _owned(store, subscription_id), Clock().now())).subscription
    finally:
        store.close()


def _rotate(args: argparse.Namespace) -> int:
    from usecases.webhooks import rotate

    sub = _changed(args.subscription_id, lambda webhooks, s, now: rotate(webhooks, s, now, drop_old=args.drop_old))
    _print_secret(sub, "new secret of", args.json)
    if len(sub.secrets) > 1 and not args.json:
        print("the previous secret still signs beside it: --drop-old once every receiver has the new one",
              file=sys.stderr)
    return 0


def _enable(args: argparse.Namespace) -> int:
    from usecases.webhooks import enable

    sub = _changed(args.subscription_id, enable)
    if args.json:
        print(json.dumps(_shown(sub, secret=False), sort_keys=True))
    else:
        print(f"{sub.subscription_id} is on again")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from usecases.webhooks import remove

    store = _store()
    try:
        gone = _audited(store, remove(store.webhooks, _owned(store, args.subscription_id)))
    finally:
        store.close()
    sub = gone.subscription
    if args.json:
        print(json.dumps({"deleted": sub.subscription_id, "deliveries": gone.deliveries}, sort_keys=True))
    else:
        print(f"deleted {sub.subscription_id} and {gone.deliveries} deliveries of its log")
    return 0


def _log(args: argparse.Namespace) -> int:
    from usecases.webhooks import deliveries

    store = _store()
    try:
        found = deliveries(store.webhooks, agent_id=args.agent, subscription_id=args.subscription, status=args.status,
                           limit=args.limit)
    finally:
        store.close()
    rows = [{"delivery_id": d.delivery_id, "subscription_id": d.subscription_id, "agent_id": d.agent_id,
             "kind": d.event.kind, "status": d.status, "attempts": d.attempts, "last_status": d.last_status,
             "last_error": d.last_error, "created_at": d.created_at.isoformat(),
             "next_attempt_at": d.next_attempt_at.isoformat()} for d in found]
    if args.json:
        print(json.dumps(rows, sort_keys=True))
        return 0
    for r in rows:
        answer = f"HTTP {r['last_status']}" if r["last_status"] else (r["last_error"] or "-")
        print(f"{r['created_at']}  {r['delivery_id']}  {r['kind']:<19}  {r['status']:<9}  "
              f"{r['attempts']} attempts  {answer}")
    if not rows:
        print("no deliveries", file=sys.stderr)
    return 0


def _redeliver(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from pipeline.errors import InvalidInput
    from usecases.webhooks import by_agent, redeliver

    if not args.delivery_ids and not args.failed:
        raise InvalidInput("DELIVERY_ID", "name deliveries (memoryctl webhooks log), or --failed with --agent")
    if args.failed and not args.agent:
        raise InvalidInput("--agent", "--failed sends again the failed deliveries of one agent: name it")
    store = _store()
    try:
        done = redeliver(store.webhooks, args.delivery_ids, Clock().now(),
                         failed_of=args.agent if args.failed else None)
        queued, missing = done.queued, [i for i in args.delivery_ids if i not in done.queued]
        for each in by_agent(store.webhooks, done):
            _audited(store, each)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"queued": queued, "not_found": missing}, sort_keys=True))
    else:
        print(f"queued {len(queued)} deliveries again; the maintenance worker sends them within "
              f"MEMORY_WEBHOOK_SWEEP_INTERVAL_S")
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("webhooks", help="an agent's webhook subscriptions, their delivery log and redelivery")
    hooks = p.add_subparsers(dest="webhooks_command", required=True, metavar="ACTION")
    add = hooks.add_parser("add", help="subscribe a URL to an agent's events; prints the signing secret once")
    add.add_argument("--agent", required=True)
    add.add_argument("--url", required=True, help="an absolute http(s) URL")
    add.add_argument("--event", action="append", required=True, choices=EVENT_KINDS,
                     help="an event kind to send (repeat for more)")
    add.add_argument("--content", action="store_true", help="send the fact's or blob's text too (screened)")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=_add)
    listing = hooks.add_parser("list", help="subscriptions, without secrets")
    listing.add_argument("--agent")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_list)
    rotate = hooks.add_parser("rotate", help="sign with a new secret (the old one keeps signing until --drop-old)")
    rotate.add_argument("subscription_id")
    rotate.add_argument("--drop-old", action="store_true", help="stop signing with the previous secret")
    rotate.add_argument("--json", action="store_true")
    rotate.set_defaults(func=_rotate)
    enable = hooks.add_parser("enable", help="switch back on a subscription that failures switched off")
    enable.add_argument("subscription_id")
    enable.add_argument("--json", action="store_true")
    enable.set_defaults(func=_enable)
    remove = hooks.add_parser("remove", help="delete a subscription and its delivery log")
    remove.add_argument("subscription_id")
    remove.add_argument("--json", action="store_true")
    remove.set_defaults(func=_remove)
    log = hooks.add_parser("log", help="the delivery log, newest first")
    log.add_argument("--agent")
    log.add_argument("--subscription")
    log.add_argument("--status", choices=("pending", "delivered", "failed"))
    log.add_argument("--limit", type=positive_int, default=50)
    log.add_argument("--json", action="store_true")
    log.set_defaults(func=_log)
    again = hooks.add_parser("redeliver", help="queue deliveries again, due now")
    again.add_argument("delivery_ids", nargs="*", metavar="DELIVERY_ID")
    again.add_argument("--failed", action="store_true", help="every failed delivery of --agent")
    again.add_argument("--agent")
    again.add_argument("--json", action="store_true")
    again.set_defaults(func=_redeliver)
