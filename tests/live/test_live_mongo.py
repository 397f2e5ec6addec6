"""The Mongo store and Atlas search against a real server: a ``mongodb/mongodb-atlas-local``
container (MongoDB with mongot), named by ``MEMORY_TEST_MONGO_URL``.

- every store contract test (``tests/pipeline/store/test_contract*.py``) on a fresh database;
- ``memoryctl create-indexes`` twice: the second run reports the search indexes unchanged;
- one formation with Atlas search on, then the dedup shortlist through ``$vectorSearch`` and
  ``$search`` once the index has caught up.

Start the server, then run with the variable set::

    docker run -d --name atlas-local -p 27017:27017 mongodb/mongodb-atlas-local:8.0
    MEMORY_TEST_MONGO_URL='mongodb://localhost:27017/?directConnection=true' \\
        python -m pytest -q tests/live/test_live_mongo.py

Each test works in its own database (``memory_live_<random>``), dropped afterwards.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

URL = os.environ.get("MEMORY_TEST_MONGO_URL")
if not URL:
    pytest.skip("MEMORY_TEST_MONGO_URL is not set: needs an atlas-local server "
                "(docker run -d -p 27017:27017 mongodb/mongodb-atlas-local:8.0; "
                "MEMORY_TEST_MONGO_URL='mongodb://localhost:27017/?directConnection=true')",
                allow_module_level=True)

#: how long a test waits for Atlas search indexes to build and for writes to become searchable
SEARCH_WAIT_S = 180.0

# Every store contract test, collected here with the ``store`` fixture below (a real server).
from tests.pipeline.store import test_contract as _contract  # noqa: E402
from tests.pipeline.store import test_contract_memory as _contract_memory  # noqa: E402
from tests.pipeline.store.test_contract import claimed  # noqa: E402,F401  (a fixture the tests use)

for _module in (_contract, _contract_memory):
    for _name, _test in vars(_module).items():
        if _name.startswith("test_") and callable(_test):
            globals()[_name] = _test


class _LiveStore:
    """A fresh database on the server per test, dropped afterwards."""

    def __init__(self) -> None:
        from pymongo import MongoClient

        from pipeline.store.mongo import TIMEOUTS_MS

        self.client = MongoClient(URL, tz_aware=True, **TIMEOUTS_MS)
        self.name = f"memory_live_{uuid.uuid4().hex[:10]}"

    def open(self):
        from pipeline.store.mongo import MongoStore

        class _KeepOpen(MongoStore):
            def close(self) -> None:  # the fixture closes the client once, after the test
                pass

        return _KeepOpen(self.client[self.name], prefix="memory2_")

    def drop(self) -> None:
        self.client.drop_database(self.name)
        self.client.close()


@pytest.fixture
def live():
    server = _LiveStore()
    try:
        server.client.admin.command("ping")
    except Exception as exc:  # a set variable with no server behind it is a failure, said plainly
        pytest.fail(f"MEMORY_TEST_MONGO_URL={URL!r} does not answer: {exc}")
    yield server
    server.drop()


@pytest.fixture
def store(live):
    opened = live.open()
    opened.create_indexes()
    return opened


def _settings(**overrides):
    from schemas.settings import Settings

    values = dict(_env_file=None, store_url=URL, atlas_search=True, embedding_provider="hashing",
                  hashing_embedding_dim=64, llm_provider="offline", atlas_index_wait_s=SEARCH_WAIT_S)
    values.update(overrides)
    return Settings(**values)


def test_create_indexes_twice_creates_then_reports_the_search_indexes_unchanged(live, monkeypatch, capsys):
    from ops import cli
    from ops.commands import indexes as command

    store = live.open()
    monkeypatch.setattr(command, "get_settings", lambda: _settings())
    monkeypatch.setattr(command, "open_store", lambda _settings: store)
    assert cli.main(["create-indexes", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [line.split(" (")[1] for line in first["search_indexes"]] == ["created, READY)", "created, READY)"]
    assert cli.main(["create-indexes", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert [line.split(" (")[1] for line in second["search_indexes"]] == ["unchanged, READY)", "unchanged, READY)"]
    assert first["indexes"] == second["indexes"]


def _wait_until(check, what: str):
    deadline = time.monotonic() + SEARCH_WAIT_S
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, f"{what}: not seen within {SEARCH_WAIT_S:.0f} s"
            return found
        time.sleep(1.0)


def test_a_formation_with_atlas_search_and_the_dedup_shortlist(live, tmp_path):
    from pipeline.formation import candidates, stages
    from pipeline.formation.facts import NewFact
    from pipeline.search.atlas import AtlasFactSearch
    from pipeline.search.atlas_indexes import ensure_search_indexes
    from testkit.formation import decisions, facts, make_env

    env = make_env(tmp_path)
    env.store.close()
    env.store = live.open()
    env.store.create_indexes()
    outcomes = ensure_search_indexes(env.store.col("facts"), env.embedder.dim, wait_s=SEARCH_WAIT_S, progress=print)
    assert [o.status for o in outcomes] == ["READY", "READY"]
    env.search = AtlasFactSearch.from_store(env.store)
    env.settings = _settings()
    env.agent()

    def form(rows, text, answer=None):
        env.llm.on("extract_facts", facts(("user", text)), times=1)
        if answer is not None:
            env.llm.on("decide_facts", answer, times=1)
        run_id = env.new_run(rows)
        for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
            assert stage(run_id, env) is not None
        return run_id

    # two near-duplicates seconds apart: the second sees the first through the recent facts,
    # whatever the index has caught up with meanwhile
    form([("user", "u-1", "My email is alice@example.com.")], "Alice's email is alice@example.com")
    form([("user", "u-1", "Again, my email address is alice@example.com.")],
         "Alice's email address is alice@example.com", decisions((0, "NONE")))
    [first] = env.live_facts()
    assert first.content == "Alice's email is alice@example.com"

    # once the index shows the fact, both Atlas branches of the shortlist find it
    text = "Alice's email is now alice@example.org"
    new = NewFact(index=0, scope="user", scope_key=first.scope_key, text=text, hash="h0")
    vectors = {0: env.embedder.embed([text]).vectors[0]}
    shortlist = _wait_until(
        lambda: candidates.shortlist(env.search, "agent-1", [new], vectors, env.embedder.model, limit=20)[0],
        "the formed fact in Atlas search")
    assert first.fact_id in shortlist
    text_hits = env.search.text("agent-1", [first.scope_key], "alice emial", 10, None)
    assert [h.fact_id for h in text_hits] == [first.fact_id]  # a typo is tolerated on the server too


def test_a_filtered_search_runs_on_the_server_inside_both_branches(live):
    """The label filter path as the server takes it: declared as a vector ``filter`` field and a
    ``token`` field, an array matched by ``$in`` / ``in``, inside both stages."""
    from pipeline.embeddings.hashing import HashingEmbedder
    from pipeline.search.atlas import AtlasFactSearch
    from pipeline.search.atlas_indexes import ensure_search_indexes
    from pipeline.text import text_hash
    from schemas.documents import Fact
    from testkit.documents import T0

    embedder = HashingEmbedder(64)
    store = live.open()
    store.create_indexes()
    assert [o.status for o in ensure_search_indexes(store.col("facts"), embedder.dim, wait_s=SEARCH_WAIT_S,
                                                    progress=print)] == \
        ["READY", "READY"]
    texts = {"f1": ("the festival budget for the Lisbon venue", ["finance"], {"project": "apollo"}),
             "f2": ("the festival budget for the Porto venue", ["travel"], {"project": ["zeus", "apollo"]}),
             "f3": ("the festival budget for the Faro venue", ["finance"], {"project": "zeus", "tier": 2})}
    for fact_id, (text, categories, metadata) in texts.items():
        store.facts.insert_fact(Fact(
            fact_id=fact_id, agent_id="a1", scope="agent", scope_key="agent", content=text, hash=text_hash(text),
            embedding=embedder.embed([text]).vectors[0], embedding_model=embedder.model, formed_at=T0,
            categories=categories, metadata=metadata))
    search = AtlasFactSearch.from_store(store)
    vector = embedder.embed(["festival budget"]).vectors[0]

    def both(having):
        semantic = {h.fact_id for h in search.semantic("a1", ["agent"], embedder.model, vector, 10, None, having=having)}
        text = {h.fact_id for h in search.text("a1", ["agent"], "festival budget", 10, None, having=having)}
        return semantic, text

    _wait_until(lambda: both([]) == ({"f1", "f2", "f3"},) * 2, "the three facts in both Atlas indexes")
    assert both([["category:finance"]]) == ({"f1", "f3"},) * 2
    assert both([['meta:project="apollo"']]) == ({"f1", "f2"},) * 2
    assert both([["category:finance"], ['meta:project="zeus"'], ["meta:tier=2"]]) == ({"f3"},) * 2
