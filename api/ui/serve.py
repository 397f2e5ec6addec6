"""``memoryctl ui``: the API app with its inspector, served by uvicorn in this process, over
the store of ``MEMORY_STORE_URL``, with a fresh admin key that only a one-time link reveals.

The key is created at start, handed to the app as a one-time sign-in code (printed as a
link), and revoked when the server stops: no credential outlives the process or one use in a
URL. With ``worker`` a Celery worker runs in this process too (the ``make demo`` set-up: a
``memory://`` broker has no other process to reach), so a replay from the runs page forms
the run here.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator

from schemas.settings import Settings


def login_url(host: str, port: int, code: str) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{shown}:{port}/ui/login/{code}"


@contextlib.contextmanager
def _in_process_worker(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from workers.in_process import running_worker

    with running_worker():
        yield


def _revoke(store, key_id: str, revoke_key) -> None:
    from pipeline.clock import Clock
    from pipeline.errors import InvalidInput, StoreFileMissing

    try:
        revoke_key(store.access, key_id, Clock().now(), by="cli")
    except (InvalidInput, StoreFileMissing):
        # the store file was replaced or deleted while serving: the key went with the old file
        print(f"the inspector's key {key_id} was in a store file since replaced or deleted: nothing to revoke",
              file=sys.stderr)


def serve(settings: Settings, *, host: str, port: int, worker: bool, access_log: bool, log_level: str,
          as_json: bool = False) -> int:
    """Serve until interrupted; prints the one-time sign-in link first (stdout, flushed; with
    ``as_json`` one JSON object with ``url`` and ``login``)."""
    import uvicorn

    from api.app import create_app
    from usecases.keys import create_key, revoke_key
    from api.limits import RateLimiter
    from ops.stores import open_existing
    from pipeline.clock import Clock

    store = open_existing(settings)
    secret, key = create_key(store.access, "admin", Clock().now(), label="inspector (memoryctl ui)")
    try:
        # one local operator: no rate limit, so no Redis is needed to look at a store
        app = create_app(settings, rate_limiter=RateLimiter(None, 0))
        code = app.state.ui_sessions.issue_code(secret)
        # uvicorn stops gracefully on SIGTERM, then raises it again under the handler it found:
        # make that an exit that runs the ``finally`` below, so the key is revoked
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with _in_process_worker(worker):
            print(f"inspector on http://{host}:{port}/ui/ over {settings.store_url}", file=sys.stderr)
            if as_json:
                print(json.dumps({"url": f"http://{host}:{port}/ui/", "login": login_url(host, port, code)}), flush=True)
            else:
                print(f"open (once; the link signs you in and is then spent): {login_url(host, port, code)}", flush=True)
            uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=access_log, proxy_headers=False)
    finally:
        _revoke(store, key.key_id, revoke_key)
        store.close()
    return 0
