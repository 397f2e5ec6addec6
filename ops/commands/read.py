"""``memoryctl context|search|stats|status``: read an agent's memory as the runtime sees it (design §6).

    memoryctl context --agent a1 --session s1 --user u1 [--force-refresh] [--max-tokens N] [--as-of ISO]
                      [--query TEXT] [--category NAME ...] [--meta KEY=VALUE ...] [--json]
    memoryctl search  --agent a1 --session s1 --user u1 -q "alice email" [-q ...] [--top-k 10] [--debug]
                      [--as-of ISO] [--category NAME ...] [--meta KEY=VALUE ...] [--json]
    memoryctl stats   --agent a1 [--user u1] [--session s1] [--json]
    memoryctl status  --agent a1 [--user u1] [--session s1] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ops.commands import positive_int
from ops.filter_args import add_filter_args, filter_of, flag_named
from schemas.settings import get_settings


AS_OF_HELP = ("show memory as it was valid at this ISO 8601 time (no offset: UTC), e.g. "
              "2026-05-01T12:00:00Z; default now")


def _with_service(args: argparse.Namespace, work: Callable[[Any], Any]) -> Any:
    from ops.stores import open_existing
    from pipeline.service import MemoryService

    settings = get_settings()
    store = open_existing(settings)
    try:
        return work(MemoryService(args.agent, settings=settings, store=store))
    finally:
        store.close()


def _iso_time(text: str) -> datetime:
    """An argparse type for ``--as-of``: ISO 8601; a time without an offset is UTC."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-05-01T12:00:00Z, got {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _context(args: argparse.Namespace) -> int:
    narrowed = filter_of(args)
    xml = _with_service(args, lambda s: flag_named(lambda: s.get_memory_context(
        session_id=args.session, user_id=args.user, force_refresh=args.force_refresh, max_tokens=args.max_tokens,
        as_of=args.as_of, query=args.query, **narrowed,
    )))
    if args.json:
        print(json.dumps({"agent_id": args.agent, "session_id": args.session, "user_id": args.user, "context": xml}))
    else:
        print(xml or "(empty context: nothing to show for this agent, session and user)")
    return 0


def _search(args: argparse.Namespace) -> int:
    query = args.query[0] if len(args.query) == 1 else args.query
    narrowed = filter_of(args)
    answer = _with_service(args, lambda s: flag_named(lambda: s.search_facts(
        query, session_id=args.session, user_id=args.user, top_k=args.top_k, debug=args.debug, as_of=args.as_of,
        **narrowed,
    )))
    if args.json:
        print(json.dumps(answer))
        return 0
    results = answer["results"] if args.debug else answer
    if not results:
        print("no facts found")
    for r in results:
        print(f"{r['score']:.4f}  [{r['scope']}] {r['content']}  ({r['age']}, {r['id']}){_labels(r)}")
    if args.debug:
        print(json.dumps(answer["debug"], indent=2))
    return 0


def _labels(hit: dict) -> str:
    """A hit's categories and metadata, as the filter options write them."""
    shown = [*hit.get("categories", []),
             *(f"{k}={json.dumps(v)}" for k, held in hit.get("metadata", {}).items()
               for v in (held if isinstance(held, list) else [held]))]
    return f"  {{{', '.join(shown)}}}" if shown else ""


def _table(title: str, payload: dict) -> None:
    print(f"{title} of agent {payload['agent_id']}")
    for key, row in payload["scopes"].items():
        print(f"  {key}: " + ", ".join(f"{k}={_cell(v)}" for k, v in row.items() if k != "scope"))
    for name, row in (payload.get("provider_limits") or {}).items():
        print(f"  provider limit {name}: " + ", ".join(f"{k}={_cell(v)}" for k, v in row.items()))


def _cell(value) -> str:
    """One figure for a person to read: a priced cost by its text, token counts as
    ``input 12601 / output 1573``, a list joined (``none`` when empty); the JSON form is ``--json``."""
    if isinstance(value, dict):
        if "text" in value:
            return str(value["text"])
        return " / ".join(f"{k} {_cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def _stats(args: argparse.Namespace) -> int:
    payload = _with_service(args, lambda s: s.get_memory_stats(user_id=args.user, session_id=args.session))
    print(json.dumps(payload)) if args.json else _table("memory", payload)
    return 0


def _status(args: argparse.Namespace) -> int:
    payload = _with_service(args, lambda s: s.get_consolidation_status(user_id=args.user, session_id=args.session))
    from usecases.limits import provider_limits

    limits = provider_limits(get_settings())
    if limits:  # what the shared provider limits hold back now (design §8)
        payload["provider_limits"] = limits
    print(json.dumps(payload)) if args.json else _table("consolidation status", payload)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    def common(parser: argparse.ArgumentParser, *, session_required: bool) -> None:
        parser.add_argument("--agent", required=True, help="agent id")
        parser.add_argument("--session", required=session_required, help="session id")
        parser.add_argument("--user", help="user id (omit for no user)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("context", help="the memory-context XML the agent gets before its reply")
    common(p, session_required=True)
    p.add_argument("--force-refresh", action="store_true", help="rebuild instead of reading the cache")
    p.add_argument(
        "--max-tokens", type=positive_int, default=None,
        help="token budget of the context (estimated; default MEMORY_CONTEXT_MAX_TOKENS, unset: derived "
        "from the limits so that every blob at its word limit fits)",
    )
    p.add_argument("--as-of", type=_iso_time, default=None, help=AS_OF_HELP)
    p.add_argument("--query", default=None,
                   help="the current message: the facts a search for it finds are shown first (<RelevantFacts>)")
    add_filter_args(p)
    p.set_defaults(func=_context)

    p = sub.add_parser("search", help="run search_facts as the agent would")
    common(p, session_required=True)
    p.add_argument("-q", "--query", action="append", required=True, help="a query; repeat for up to 3")
    p.add_argument("--top-k", type=int, default=10, help="results per query (1-50)")
    p.add_argument("--debug", action="store_true", help="add timings and scores of each stage")
    p.add_argument("--as-of", type=_iso_time, default=None, help=AS_OF_HELP)
    add_filter_args(p)
    p.set_defaults(func=_search)

    p = sub.add_parser("stats", help="words, reflections and facts per scope, with timestamps")
    common(p, session_required=False)
    p.set_defaults(func=_stats)

    p = sub.add_parser("status", help="consolidation buffers against their thresholds")
    common(p, session_required=False)
    p.set_defaults(func=_status)
