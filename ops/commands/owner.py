"""``memoryctl instructions|pause|resume``: an owner's controls of one agent (design §13).

    memoryctl instructions show AGENT [--json]
    memoryctl instructions set AGENT --stage extraction [--scope all] (--text T | --file F)
    memoryctl instructions clear AGENT --stage extraction [--scope all]
    memoryctl instructions rollback AGENT --stage extraction [--scope all] --version N
    memoryctl pause AGENT (--all | --agent-memory | --session S)
    memoryctl resume AGENT (--all | --agent-memory | --session S) [--backfill]

The same use cases as the HTTP routes (``usecases.instructions``, ``usecases.pauses``), audited as
done by ``cli``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.errors import InvalidInput
from schemas.owner import INSTRUCTION_SCOPES, INSTRUCTION_STAGES
from schemas.settings import get_settings


def _open():
    from ops import stores

    return stores.open_existing(get_settings())


def _audited(store, result):
    """The use case's result, its audit entry recorded as done by ``cli``."""
    from pipeline.clock import Clock
    from usecases.audit import CLI, recorded

    return recorded(store.access, Clock().now(), CLI, result)


def on_store(act):
    """What ``act`` returns of the configured store, closed after."""
    store = _open()
    try:
        return act(store)
    finally:
        store.close()


def agent_verb(verbs: argparse._SubParsersAction, name: str, text: str, func, *arguments: tuple[tuple, dict]) -> None:
    """A verb on one of an agent's settings: the agent's id, ``arguments`` (each the positional
    and keyword arguments of one ``add_argument``), then ``--json``."""
    verb = verbs.add_parser(name, help=text)
    verb.add_argument("agent_id")
    for args, kwargs in arguments:
        verb.add_argument(*args, **kwargs)
    verb.add_argument("--json", action="store_true")
    verb.set_defaults(func=func)


def _line(i) -> str:
    text = " / ".join(i.text.splitlines()) if i.text else "(cleared)"
    back = f" (rollback to v{i.rolled_back_to})" if i.rolled_back_to else ""
    return f"{i.stage:<13} {i.scope:<8} v{i.version:<3} {i.set_at.isoformat()} by {i.set_by}{back}: {text}"


def _show(args: argparse.Namespace) -> int:
    from usecases import instructions

    store = _open()
    try:
        history = instructions.read(store.ingest, args.agent_id).history
    finally:
        store.close()
    if args.json:
        print(json.dumps([i.model_dump(mode="json") for i in history], sort_keys=True))
        return 0
    for i in history:
        print(_line(i))
    if not history:
        print(f"agent {args.agent_id} has no instructions (memoryctl instructions set ...)", file=sys.stderr)
    return 0


def _text(args: argparse.Namespace) -> str:
    if args.file is None:
        return args.text
    try:
        return Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput("--file", f"cannot read {args.file}: {exc}") from None


def _change(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from usecases import instructions

    store, now = _open(), Clock().now()
    try:
        if args.verb == "set":
            changed = instructions.set_text(store.ingest, get_settings(), args.agent_id, args.stage, args.scope,
                                            _text(args), by="cli", now=now, where="--file" if args.file else "--text")
        elif args.verb == "clear":
            changed = instructions.clear(store.ingest, args.agent_id, args.stage, args.scope, by="cli", now=now)
        else:
            changed = instructions.rollback(store.ingest, get_settings(), args.agent_id, args.stage, args.scope,
                                            args.version, by="cli", now=now)
        found = _audited(store, changed).instruction
    finally:
        store.close()
    print(json.dumps(found.model_dump(mode="json"), sort_keys=True) if args.json else _line(found))
    return 0


def _target(args: argparse.Namespace) -> tuple[str, str | None]:
    if args.session:
        return "session", args.session
    return ("all", None) if args.all else ("agent", None)


def _pause(args: argparse.Namespace) -> int:
    from pipeline.clock import Clock
    from usecases import pauses

    target, session = _target(args)
    store = _open()
    try:
        found = _audited(store, pauses.pause(store.ingest, args.agent_id, target, session_id=session, by="cli",
                                             now=Clock().now())).pause
    finally:
        store.close()
    if args.json:
        print(json.dumps(found.model_dump(mode="json"), sort_keys=True))
    else:
        print(f"paused {found.scope_key} of agent {args.agent_id} since {found.paused_at.isoformat()}: content and "
              "events are kept, nothing new is formed")
    return 0


def _resume(args: argparse.Namespace) -> int:
    from ops.commands.runs import send_first_stage
    from pipeline.clock import Clock
    from usecases import pauses

    target, session = _target(args)
    settings, now = get_settings(), Clock().now()
    if args.backfill:
        from ops.broker import check_broker

        check_broker(settings)
    store = _open()
    try:
        resumed = _audited(store, pauses.resume(store, args.agent_id, target, session_id=session, now=now,
                                                backfill_lease_s=settings.claim_lease_s if args.backfill else None,
                                                start=send_first_stage))
        ended, runs = resumed.ended, resumed.runs
    finally:
        store.close()
    if args.json:
        print(json.dumps({"scope_key": ended.scope_key, "paused_at": ended.paused_at.isoformat(),
                          "resumed_at": now.isoformat(), "backfill_runs": runs}, sort_keys=True))
    else:
        more = f"; {len(runs)} backfill run(s) started" if args.backfill else " (no backfill)"
        print(f"resumed {ended.scope_key} of agent {args.agent_id}, paused since {ended.paused_at.isoformat()}{more}")
    return 0


def _targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("agent_id")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="the whole agent: every scope")
    which.add_argument("--agent-memory", action="store_true", help="the agent's shared memory (agent scope)")
    which.add_argument("--session", help="one session's memory")
    p.add_argument("--json", action="store_true")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("instructions", help="an agent's Memory Instructions: show, set, clear, roll back")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    show = verbs.add_parser("show", help="every version of every instruction")
    show.add_argument("agent_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)
    for verb, text in (("set", "set a new version"), ("clear", "clear: a new, empty version"),
                       ("rollback", "bring back an earlier version's text")):
        v = verbs.add_parser(verb, help=text)
        v.add_argument("agent_id")
        v.add_argument("--stage", required=True, choices=INSTRUCTION_STAGES)
        v.add_argument("--scope", default="all", choices=INSTRUCTION_SCOPES,
                       help="all (default), or a scope type whose instruction refines it")
        if verb == "set":
            source = v.add_mutually_exclusive_group(required=True)
            source.add_argument("--text", help="the instruction (at most 300 words; 'focus: a, b' / 'ignore: c' lines)")
            source.add_argument("--file", help="read the instruction from this UTF-8 file")
        if verb == "rollback":
            v.add_argument("--version", type=int, required=True)
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=_change)
    pause = sub.add_parser("pause", help="pause formation for an agent, its agent memory or a session")
    _targets(pause)
    pause.set_defaults(func=_pause)
    resume = sub.add_parser("resume", help="resume formation (no backfill unless --backfill)")
    _targets(resume)
    resume.add_argument("--backfill", action="store_true", help="form from the messages that arrived while paused")
    resume.set_defaults(func=_resume)
