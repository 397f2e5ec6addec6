"""``memoryctl caps``: spend caps against the spend so far (design §13, docs/operations.md
"Spend caps").

    memoryctl caps show [--agent A] [--json]
    memoryctl caps set (--agent A | --global) [--day-soft USD] [--day-hard USD] [--month-soft USD] [--month-hard USD]
    memoryctl caps clear (--agent A | --global)

``set`` replaces the owner's caps with those given (a window left out has no cap); ``clear``
removes them, so ``MEMORY_SPEND_CAPS`` applies again. Only priced spend counts towards a cap.
"""

from __future__ import annotations

import argparse
import json

from pydantic import ValidationError

from pipeline.errors import InvalidInput


def _store():
    from ops.stores import open_existing
    from schemas.settings import get_settings

    return open_existing(get_settings())


def _show(args: argparse.Namespace) -> int:
    from ops.caps import format_report
    from usecases.caps import caps_report
    from pipeline.clock import Clock
    from schemas.settings import get_settings

    store = _store()
    try:
        report = caps_report(store, get_settings(), Clock().now(), args.agent)
    finally:
        store.close()
    print(json.dumps(report, sort_keys=True) if args.json else format_report(report))
    return 0


def _caps_of(args: argparse.Namespace):
    from schemas.caps import SpendCaps

    try:
        return SpendCaps.model_validate({
            "day": {"soft_usd": args.day_soft, "hard_usd": args.day_hard},
            "month": {"soft_usd": args.month_soft, "hard_usd": args.month_hard}})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InvalidInput("--" + "-".join(str(p).replace("_usd", "") for p in error["loc"]),
                           error["msg"].removeprefix("Value error, ")) from None


def _change(args: argparse.Namespace, new) -> int:
    from pipeline.clock import Clock
    from usecases.audit import CLI, recorded
    from usecases.caps import set_caps

    store = _store()
    try:
        now = Clock().now()
        recorded(store.access, now, CLI, set_caps(store, args.agent, new, now))
    finally:
        store.close()
    if args.json:
        print(json.dumps({"agent_id": args.agent, "caps": new.model_dump() if new is not None else None},
                         sort_keys=True))
        return 0
    who = f"agent {args.agent}" if args.agent else "the global caps"
    print(f"{who}: {'caps set' if new is not None else 'caps removed (MEMORY_SPEND_CAPS applies)'}")
    return 0


def _owner(p: argparse.ArgumentParser) -> None:
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", help="the agent whose caps these are")
    who.add_argument("--global", dest="glob", action="store_true", help="the caps on every agent's spend together")
    p.add_argument("--json", action="store_true", help="print the caps now set as JSON")


def _usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of USD") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number of USD, 0 or more")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("caps", help="spend caps per agent and global, against the spend so far")
    verbs = p.add_subparsers(dest="caps_command", required=True)
    show = verbs.add_parser("show", help="the caps and the priced spend of this UTC day and month")
    show.add_argument("--agent", help="this agent (default: every agent whose caps were set, and the global caps)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)
    put = verbs.add_parser("set", help="replace an agent's or the global caps (a window left out: no cap)")
    _owner(put)
    for window in ("day", "month"):
        for kind in ("soft", "hard"):
            put.add_argument(f"--{window}-{kind}", type=_usd, metavar="USD",
                             help=f"the {kind} cap of the UTC {window}" + (
                                 " (premium stages move to the fast model)" if kind == "soft" else " (formation waits)"))
    put.set_defaults(func=lambda args: _change(args, _caps_of(args)))
    clear = verbs.add_parser("clear", help="remove an agent's or the global caps (MEMORY_SPEND_CAPS applies again)")
    _owner(clear)
    clear.set_defaults(func=lambda args: _change(args, None))
