"""How fast does the inspector render at 100k facts? p50/p95 of the fact list (paginated)
and of the fact timeline, served by the app in this process.

    python -m bench.ui --data ../shared/data/locomo/dev.json [--facts 100000] [--requests 200] [--json]

Setup: a fresh SQLite store of ``--facts`` facts of one agent (LoCoMo's ``observation``
sentences, repeated with a counter to reach the count), spread over the agent scope and 1,000
users' scopes; one fact in ten has two earlier versions in its history. The app is
``api.app.create_app`` with its inspector (``api.ui``), signed in through the log-in form with
an admin key, and driven by Starlette's TestClient (in-process ASGI, so the figures are the
render path: routing, store reads, templates; not the network). Pages measured:

- ``list_scope``: one user's facts, page 1 and a deep page (``/ui/agents/A/facts?scope=...``);
- ``list_agent``: the agent scope's first three pages;
- ``list_deep``: a page halfway down the agent scope (``OFFSET`` walks the index to it);
- ``timeline``: a fact with three versions (``/ui/facts/{id}``).

Page size is the shipped ``api.ui.views.PAGE_SIZE``. The last line printed is one JSON object
(with the load average).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.locomo_retrieval import data_arguments, read_conversations

AGENT = "A"
USERS = 1000


def sentences(conversations: list[dict]) -> list[str]:
    found = []
    for conversation in conversations:
        for session in (conversation.get("observation") or {}).values():
            for items in session.values():
                found.extend(text for text, _ in items)
    return found


def fill(store, texts: list[str], count: int) -> list[str]:
    """``count`` facts; returns the ids of those with history."""
    from pipeline.text import text_hash
    from schemas.documents import Fact, FactHistoryEntry, scope_key

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with_history = []
    for i in range(count):
        text = f"{texts[i % len(texts)]} (#{i})"
        user = None if i % 5 == 0 else f"u{i % USERS}"
        key = scope_key("agent") if user is None else scope_key("user", user_id=user)
        formed = start + timedelta(minutes=i)
        history = []
        if i % 10 == 0:
            history = [FactHistoryEntry(content=f"{texts[(i + k) % len(texts)]} (v{k + 1})", version=k + 1,
                                        changed_at=formed + timedelta(days=k + 1), run_id=f"r{i}-{k + 1}",
                                        valid_from=formed + timedelta(days=k), valid_to=formed + timedelta(days=k + 1))
                       for k in range(2)]
            with_history.append(f"f{i}")
        store.facts.insert_fact(Fact(
            fact_id=f"f{i}", agent_id=AGENT, scope="agent" if user is None else "user", user_id=user, scope_key=key,
            content=text, hash=text_hash(text), source_session_id=f"s{i % 3000}", source_message_ids=[f"m{i}"],
            source_user_ids=[user] if user else [], source_run_id=f"r{i}-0", formed_at=formed,
            updated_at=formed + timedelta(days=len(history)), valid_from=formed + timedelta(days=len(history)),
            version=len(history) + 1, history=history,
        ))
    return with_history


def timed(client, paths: list[str], requests: int) -> dict[str, float]:
    for path in paths[:5]:  # warm the templates and the store's caches
        assert client.get(path).status_code == 200, path
    took = []
    for n in range(requests):
        path = paths[n % len(paths)]
        t = time.perf_counter()
        answer = client.get(path)
        took.append((time.perf_counter() - t) * 1000)
        assert answer.status_code == 200, (path, answer.status_code)
    took.sort()
    return {"p50_ms": round(statistics.median(took), 2), "p95_ms": round(took[int(len(took) * 0.95) - 1], 2),
            "requests": requests}


def main(argv: list[str] | None = None) -> int:
    parser = data_arguments(__doc__)
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200, help="requests per page kind")
    args = parser.parse_args(argv)
    conversations = read_conversations("bench.ui", args.data)
    if conversations is None:
        return 2
    texts = sentences(conversations)

    folder = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    result = _measure(folder, texts, args)
    if not args.json:
        for name in ("list_scope", "list_agent", "list_deep", "timeline"):
            print(f"{name:<12} p50 {result[name]['p50_ms']:>7} ms   p95 {result[name]['p95_ms']:>7} ms", file=sys.stderr)
    print(json.dumps(result, sort_keys=True))
    return 0


def _measure(folder: Path, texts: list[str], args) -> dict:
    """Fill a SQLite store in ``folder`` with ``args.facts`` facts, then time each page kind
    through the app as a signed-in admin."""
    from fastapi.testclient import TestClient

    from api.app import create_app
    from usecases.keys import create_key
    from api.limits import RateLimiter
    from api.ui import views
    from pipeline.clock import Clock
    from pipeline.store.sqlite import SQLiteStore
    from schemas.api_settings import ApiSettings
    from schemas.settings import Settings

    settings = Settings(_env_file=None, store_url=f"sqlite:///{folder / 'memory.db'}", embedding_provider="hashing")
    store = SQLiteStore(str(folder / "memory.db"))
    store.create_indexes()
    t = time.perf_counter()
    with_history = fill(store, texts, args.facts)
    fill_s = time.perf_counter() - t

    class Deps:
        pass

    deps = Deps()
    deps.store, deps.clock, deps.settings = store, Clock(), settings
    app = create_app(settings, deps=deps, service_factory=lambda agent: None, send_job=lambda job: None,
                     start_run=lambda run: None, rate_limiter=RateLimiter(None, 0),
                     api_settings=ApiSettings(_env_file=None, rate_limit_per_minute=0))
    secret, _ = create_key(store.access, "admin", Clock().now())
    rng = random.Random(7)
    deep = max(1, (args.facts // 5 // views.PAGE_SIZE) // 2)
    with TestClient(app) as client:
        # the one-time link memoryctl ui prints (the form would need its CSRF token)
        code = app.state.ui_sessions.issue_code(secret)
        assert client.get(f"/ui/login/{code}", follow_redirects=False).status_code == 303
        users = [f"u{rng.randrange(USERS)}" for _ in range(20)]
        result = {
            "list_scope": timed(client, [f"/ui/agents/{AGENT}/facts?scope=user:{u}&page={1 + i % 2}"
                                         for i, u in enumerate(users)], args.requests),
            "list_agent": timed(client, [f"/ui/agents/{AGENT}/facts?scope=agent&page={p}" for p in (1, 2, 3)],
                                args.requests),
            "list_deep": timed(client, [f"/ui/agents/{AGENT}/facts?scope=agent&page={deep}"], max(20, args.requests // 4)),
            "timeline": timed(client, [f"/ui/facts/{rng.choice(with_history)}" for _ in range(50)], args.requests),
        }
    store.close()
    result.update({
        "facts": args.facts, "users": USERS, "page_size": views.PAGE_SIZE, "deep_agent_page": deep,
        "fill_s": round(fill_s, 1), "store": "sqlite", "load_average": [round(x, 2) for x in os.getloadavg()],
    })
    return result


if __name__ == "__main__":
    sys.exit(main())
