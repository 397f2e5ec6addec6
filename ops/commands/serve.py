"""``memoryctl serve``: the HTTP API under uvicorn (design §12 "Interfaces").

    memoryctl serve [--host 127.0.0.1] [--port 8080] [--workers N]
    memoryctl serve --openapi          # print the OpenAPI document and exit

Each uvicorn worker process builds its own app (``api.app.create_app``, as a factory): its
own store connections and clients. Rate limits are kept in Redis, so they hold across them.
"""

from __future__ import annotations

import argparse
import json
import sys

from ops.commands import positive_int


def require_api_extra() -> None:
    """The API's libraries come with the ``api`` extra; without them, say how to get them."""
    from pipeline.errors import ConfigurationError

    try:
        import fastapi  # noqa: F401
        import jwt  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"the HTTP API needs the api extra ({exc.name} is missing): "
                                 "pip install 'memory-pipeline[api]'") from None


def api_settings():
    """The ``MEMORY_API_*`` settings, or one line naming the variable that is wrong."""
    from pydantic import ValidationError

    from pipeline.errors import ConfigurationError
    from schemas.api_settings import get_api_settings

    try:
        return get_api_settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "MEMORY_API_" + str(first["loc"][0]).upper() if first.get("loc") else "a MEMORY_API_* variable"
        raise ConfigurationError(f"{name}: {first['msg']}") from None


def _serve(args: argparse.Namespace) -> int:
    from ops.stores import announce, open_existing
    from schemas.settings import get_settings

    require_api_extra()
    if args.openapi:
        from api.app import create_app

        print(json.dumps(create_app(deps=_NoDeps()).openapi(), indent=2, sort_keys=True))
        return 0
    from api.limits import rate_limit_redis
    from ops.broker import check_broker

    settings, chosen = get_settings(), api_settings()  # a wrong variable stops here, in one line, not in each worker
    check_broker(settings)  # what the API publishes (messages, session ends, jobs) must reach the workers
    rate_limit_redis(chosen.redis_url, settings.broker_url, chosen.rate_limit_per_minute)
    store = open_existing(settings)  # serve an existing store only (memoryctl create-indexes makes one)
    try:
        if not store.access.list_api_keys():
            print("no API keys yet: create one with memoryctl keys create --admin (or --agent AGENT)", file=sys.stderr)
    finally:
        store.close()
    announce("store", settings.store_url)
    import uvicorn

    if args.json:  # where it serves, as data (uvicorn's own lines follow on stderr)
        print(json.dumps({"url": f"http://{args.host}:{args.port}", "workers": args.workers,
                          "openapi": "/openapi.json"}, sort_keys=True), flush=True)
    else:
        print(f"serving on http://{args.host}:{args.port} ({args.workers} worker(s)); OpenAPI at /openapi.json",
              file=sys.stderr)
    from api.serving import run  # N workers without uvicorn's 40 ms stall per keep-alive request

    run("api.app:create_app", host=args.host, port=args.port, workers=args.workers,
        log_level=args.log_level, access_log=not args.no_access_log, proxy_headers=False)
    return 0


class _NoDeps:
    """Printing the OpenAPI document opens no store and no client."""

    store = clock = None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the HTTP API (uvicorn); credentials: memoryctl keys")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 in a container)")
    p.add_argument("--port", type=positive_int, default=8080)
    p.add_argument("--workers", type=positive_int, default=1, help="uvicorn worker processes (default 1)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--no-access-log", action="store_true",
                   help="no access log lines (they name method, path and status, never a body)")
    p.add_argument("--openapi", action="store_true", help="print the OpenAPI document and exit")
    p.add_argument("--json", action="store_true", help="print where it serves as one JSON object on stdout")
    p.set_defaults(func=_serve)
