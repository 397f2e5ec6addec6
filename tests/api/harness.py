"""An API app over a real SQLite store with memory in it, for the API tests.

The app is the one ``memoryctl serve`` runs (``api.app.create_app``); only the queues are
replaced by recorders (published events, started runs, queued jobs), and the embedder by the
deterministic hashing one. Keys are made with ``api.keys.create_key``, tokens with
``api.tokens.issue_user_token``, as a platform would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property

from api.app import create_app
from api.keys import create_key, revoke_key
from api.limits import RateLimiter
from api.tokens import issue_user_token
from pipeline.clock import Clock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.service import MemoryService
from schemas.api_settings import ApiSettings
from schemas.documents import ConsolidatedBlob, Reflection
from schemas.settings import Settings
from testkit.documents import fact
from testkit.publishers import RecordingPublisher

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
        "admin": create_key(store, "admin", now)[0],
        "agent_a": create_key(store, "agent", now, agent_id="A")[0],
        "agent_b": create_key(store, "agent", now, agent_id="B")[0],
        # an owner's key for agent A (design §13): curation only, no reads or publishing
        "curator_a": create_key(store, "agent", now, agent_id="A", scopes=["curate"])[0],
        "curator_b": create_key(store, "agent", now, agent_id="B", scopes=["curate"])[0],
    }
    revoked, key = create_key(store, "agent", now, agent_id="A")
    revoke_key(store, key.key_id, now)
    keys["revoked"] = revoked
    return Api(app, deps, publisher, jobs, runs, keys)


def seed_memory(store, now) -> None:
    """Agent A: a fact and blob of u1, one of u2, an agent fact resting only on u1's messages,
    one shared by u1 and u2, and reflections."""
    def put(fid, text, user=None, sources=()):
        f = fact(fid, text, agent="A", user=user, embedding=EMB.embed([text]).vectors[0], model=EMB.model,
                 formed=now - timedelta(hours=1))
        store.insert_fact(f.model_copy(update={"source_user_ids": list(sources)}))
        store.bump_scope_versions("A", [f.scope_key])

    put("f-u1", "Alice's email is alice@example.com", user="u1", sources=["u1"])
    put("f-u2", "Bob's phone is 555 0100", user="u2", sources=["u2"])
    put("f-agent-u1", "The Mars launch is on 12 March", sources=["u1"])
    put("f-agent-both", "The Mars budget is $50,000", sources=["u1", "u2"])
    for rid, key, scope, user, sources in (("r-u1", "user:u1", "user", "u1", ["u1"]),
                                           ("r-agent-u1", "agent", "agent", None, ["u1"])):
        store.insert_reflections([Reflection(reflection_id=rid, agent_id="A", scope=scope, user_id=user, scope_key=key,
                                             content=f"reflection {rid}", source_user_ids=sources,
                                             formed_at=now - timedelta(hours=1))])
    store.save_blob(ConsolidatedBlob(agent_id="A", scope="user", scope_key="user:u1", user_id="u1",
                                     consolidated_content="VERSION: 1\nAlice likes short answers.", word_limit=300,
                                     version=1), expected_version=0)
    store.bump_scope_versions("A", ["user:u1", "agent"])


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
