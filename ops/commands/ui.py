"""``memoryctl ui``: the web inspector over a store, with a one-time sign-in link
(``api.ui.serve``; docs/inspector.md).

    memoryctl ui [--host 127.0.0.1] [--port 8765] [--worker]
"""

from __future__ import annotations

import argparse
import sys

from ops.commands import positive_int


def _ui(args: argparse.Namespace) -> int:
    from ops.commands.serve import api_settings, require_api_extra
    from schemas.settings import get_settings

    require_api_extra()
    api_settings()
    from api.ui.serve import serve
    from ops.broker import in_process

    settings = get_settings()
    worker = args.worker or in_process(settings)
    if worker and not args.worker:  # a replay or an erasure sent into memory:// is formed only here
        print("ui: MEMORY_BROKER_URL is memory:// (the demo's in-process broker): running a worker in this "
              "process, as --worker does", file=sys.stderr)
    return serve(settings, host=args.host, port=args.port, worker=worker,
                 access_log=not args.no_access_log, log_level=args.log_level, as_json=args.json)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="serve the web inspector with a fresh admin key, behind a one-time sign-in link")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=positive_int, default=8765)
    p.add_argument("--worker", action="store_true",
                   help="run a Celery worker in this process too, so replays and erasures are formed here "
                        "(always on with MEMORY_BROKER_URL=memory://, the demo's broker)")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--no-access-log", action="store_true", help="no access log lines")
    p.add_argument("--json", action="store_true", help="print the address and the sign-in link as one JSON object")
    p.set_defaults(func=_ui)
