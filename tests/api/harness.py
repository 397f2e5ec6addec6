"""An API app over a real SQLite store with memory in it, for the API tests.

The app is the one ``memoryctl serve`` runs (``api.app.create_app``); only the queues are
replaced by recorders (published events, started runs, queued jobs), and the embedder by the
deterministic hashing one. Keys are made with ``usecases.keys.create_key``, tokens with
``usecases.tokens.issue_user_token``, as a platform would. A module whose tests share one app
imports ``seeded_module`` and ``seeded_api``: the store is put back as seeded before each test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property

import pytest

from api.app import create_app
from usecases.keys import create_key, revoke_key
from api.limits import RateLimiter
from usecases.tokens import issue_user_token
from pipeline.clock import Clock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.service import MemoryService
from pipeline.store.sqlite import SQLiteStore
from schemas.api_settings import ApiSettings
from schemas.documents import ConsolidatedBlob, Reflection
from schemas.settings import Settings
from schemas.webhooks import WebhookSubscription
from testkit.documents import fact
from testkit.publishers import RecordingPublisher
from testkit.stores import snapshot

SECRET = "s" * 40
OLD_SECRET = "o" * 40
EMB = HashingEmbedder(64)


@dataclass
class Deps:
    """What the app and the erasure code need (``workers.deps.Deps`` in production)."""

    settings: Settings
    store: object
    clock: Clock = field(default_factory=Clock)
    embedder: object = EMB

    @cached_property
    def search(self):
        from pipeline.search import open_search

        return open_search(self.store, self.settings)

    @cached_property
    def llm(self):
        from pipeline.llm.offline import OfflineLLM

        return OfflineLLM()


@dataclass
class Api:
    app: object
    deps: Deps
    publisher: RecordingPublisher
    jobs: list[str]
    runs: list[str]
    keys: dict[str, str]

    def token(self, agent="A", user="u1", session=None, *, lifetime_s=600, kid="k1", secret=SECRET, now=None) -> str:
        return issue_user_token(secret, kid, agent_id=agent, user_id=user, session_id=session,
                                lifetime_s=lifetime_s, now=now)

    def client(self):
        from fastapi.testclient import TestClient

        return TestClient(self.app, raise_server_exceptions=False)

    def reset_in_memory(self) -> None:
        """Empty what the app holds in memory besides the store, for a test that puts the
        store back as it was: the recorders (published events, queued jobs, started runs), the
        inspector's sign-in links and sessions, and the caches a new app starts without (the
        services per agent with their context caches, the search's segments), which would
        otherwise answer from what an earlier test changed."""
        from api.ui.sessions import LoginSessions

        self.publisher.events.clear()
        self.jobs.clear()
        self.runs.clear()
        self.app.state.ui_sessions = LoginSessions()
        self.app.state.ctx._services.clear()
        self.deps.__dict__.pop("search", None)


def build(store, *, rate_limiter=None, api_settings=None, **settings) -> Api:
    config = Settings(_env_file=None, store_url="sqlite:///unused.db", **settings)
    deps = Deps(config, store)
    publisher, jobs, runs = RecordingPublisher(), [], []

    def service(agent_id: str) -> MemoryService:
        return MemoryService(agent_id, settings=config, store=store, search=deps.search, embedder=EMB,
                             publisher=publisher, clock=deps.clock, run_starter=runs.append)

    api_settings = api_settings or ApiSettings(_env_file=None, token_secrets={"k1": SECRET, "old": OLD_SECRET},
                                               rate_limit_per_minute=0)
    app = create_app(config, service_factory=service, api_settings=api_settings, deps=deps, send_job=jobs.append,
                     start_run=runs.append, rate_limiter=rate_limiter or RateLimiter(None, 0))
    now = deps.clock.now()
    keys = {
        "admin": create_key(store.access, "admin", now)[0],
        "agent_a": create_key(store.access, "agent", now, agent_id="A")[0],
        "agent_b": create_key(store.access, "agent", now, agent_id="B")[0],
        # an owner's key for agent A (design §13): curation only, no reads or publishing
        "curator_a": create_key(store.access, "agent", now, agent_id="A", scopes=["curate"])[0],
        "curator_b": create_key(store.access, "agent", now, agent_id="B", scopes=["curate"])[0],
    }
    revoked, key = create_key(store.access, "agent", now, agent_id="A")
    revoke_key(store.access, key.key_id, now)
    keys["revoked"] = revoked
    return Api(app, deps, publisher, jobs, runs, keys)


@pytest.fixture(scope="module", name="seeded")
def seeded_module(tmp_path_factory):
    """One store and app for a module, seeded (``seed_memory``), and the function that puts
    the store back as seeded. A new app costs far more than its store: FastAPI builds each
    route's models at the app's first requests."""
    store = SQLiteStore(str(tmp_path_factory.mktemp("seeded") / "memory.db"))
    store.create_indexes()
    built = build(store)
    seed_memory(store, built.deps.clock.now())
    yield built, snapshot(store)
    store.close()


@pytest.fixture(name="api")
def seeded_api(seeded):
    """The module's app, its store put back as seeded and what it holds in memory forgotten:
    each test starts from what a new store and app would hold, so that what one test changes
    never reaches the next. Import it with ``seeded_module`` into a module whose tests leave
    the app's wiring as it was (a test that replaces a part of the app builds its own)."""
    built, restore = seeded
    restore()
    built.reset_in_memory()
    return built


WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def seed_memory(store, now) -> None:
    """Agent A: a fact and blob of u1, one of u2, an agent fact resting only on u1's messages,
    one shared by u1 and u2, reflections, and a webhook subscription."""
    def put(fid, text, user=None, sources=()):
        f = fact(fid, text, agent="A", user=user, embedding=EMB.embed([text]).vectors[0], model=EMB.model,
                 formed=now - timedelta(hours=1))
        store.facts.insert_fact(f.model_copy(update={"source_user_ids": list(sources)}))
        store.leases.bump_scope_versions("A", [f.scope_key])

    put("f-u1", "Alice's email is alice@example.com", user="u1", sources=["u1"])
    put("f-u2", "Bob's phone is 555 0100", user="u2", sources=["u2"])
    put("f-agent-u1", "The Mars launch is on 12 March", sources=["u1"])
    put("f-agent-both", "The Mars budget is $50,000", sources=["u1", "u2"])
    for rid, key, scope, user, sources in (("r-u1", "user:u1", "user", "u1", ["u1"]),
                                           ("r-agent-u1", "agent", "agent", None, ["u1"])):
        store.reflections.insert_reflections([Reflection(reflection_id=rid, agent_id="A", scope=scope, user_id=user, scope_key=key,
                                             content=f"reflection {rid}", source_user_ids=sources,
                                             formed_at=now - timedelta(hours=1))])
    store.blobs.save_blob(ConsolidatedBlob(agent_id="A", scope="user", scope_key="user:u1", user_id="u1",
                                     consolidated_content="VERSION: 1\nAlice likes short answers.", word_limit=300,
                                     version=1), expected_version=0)
    store.leases.bump_scope_versions("A", ["user:u1", "agent"])
    store.webhooks.put_subscription(WebhookSubscription(subscription_id="whsub_a", agent_id="A", url="https://hooks.example/a",
                                               events=["fact.created"], secrets=[WEBHOOK_SECRET], created_at=now,
                                               updated_at=now))
    # the platform started u1's session s1 (a user token only speaks in sessions it is a human of)
    store.ingest.declare_session_users("s1", "A", ["u1"])


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def ingest_published(api: Api) -> None:
    """Hand every event published so far to the real ingest, as a worker takes them off the queue."""
    from pipeline.ingest import ingest_raw_event

    published, api.publisher.events[:] = list(api.publisher.events), []
    for event in published:
        ingest_raw_event(event, api.deps.store, api.deps.settings, api.deps.clock)


def mcp_call(client, headers: dict[str, str], tool: str, arguments: dict):
    """One MCP ``tools/call`` over the app's streamable HTTP endpoint (stateless: a POST stands
    alone), as JSON-RPC on the wire; returns the HTTP response."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return client.post("/mcp", json=body, headers={
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers})


def ui_sign_in(client, credential: str) -> None:
    """Sign in to the inspector through its log-in form, as a browser does (the form's CSRF
    token included)."""
    import re

    form = client.get("/ui/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    data = {"credential": credential, **({"csrf": token.group(1)} if token else {})}
    answer = client.post("/ui/login", data=data, follow_redirects=False)
    assert answer.status_code == 303, answer.text
