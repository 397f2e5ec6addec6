"""A search never mixes embedding models; ``reembed`` moves a store to the configured one,
resumably (design §13 "Offline models"). On SQLite and on the Mongo emulation."""

from __future__ import annotations

import pytest

from usecases import runs
from pipeline.clock import FrozenClock
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.errors import ConfigurationError
from pipeline.service import MemoryService
from pipeline.text import text_hash
from schemas.documents import Fact
from schemas.settings import Settings
from tests.pipeline.store.conftest import open_adapter

OLD, NEW = HashingEmbedder(16), HashingEmbedder(32)
TEXTS = [f"the lamp in room {i} is broken" for i in range(10)] + ["Alice keeps the spare keys of the studio"]


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, tmp_path):
    opened = open_adapter(request.param, tmp_path)
    opened.create_indexes()
    yield opened
    opened.close()


def _seed(store, agent: str, embedder, texts=TEXTS, clock=FrozenClock()) -> None:
    for i, (text, vector) in enumerate(zip(texts, embedder.embed(texts).vectors)):
        store.facts.insert_fact(Fact(fact_id=f"{agent}-{embedder.model}-{i}", agent_id=agent, scope="agent",
                               scope_key="agent", content=text, hash=text_hash(text), embedding=vector,
                               embedding_model=embedder.model, formed_at=clock.now()))
    store.leases.bump_scope_versions(agent, ["agent"])


def _search(store, agent: str, embedder, query: str = "who has the studio keys") -> list[str]:
    service = MemoryService(agent, settings=Settings(_env_file=None), store=store, embedder=embedder,
                            clock=FrozenClock())
    return [hit["content"] for hit in service.search_facts(query, user_id="u1", session_id="s1")]


def test_a_search_over_vectors_of_another_model_refuses_in_one_line_naming_reembed(store):
    _seed(store, "a1", OLD)
    _seed(store, "a2", NEW)
    _seed(store, "a2", OLD, texts=["an old note about lamps"])  # retired below: no longer searched
    [old] = [c.fact_id for c in store.facts.search_candidates("a2", ["agent"], None) if c.content == "an old note about lamps"]
    assert store.facts.retire_fact(old, run_id="r-retire", now=FrozenClock().now())
    store.leases.bump_scope_versions("a2", ["agent"])
    with pytest.raises(ConfigurationError) as refused:
        _search(store, "a1", NEW)
    message = str(refused.value)
    assert "\n" not in message and "`memoryctl reembed`" in message
    assert OLD.model in message and NEW.model in message
    # the check is per agent and over live facts: a2 searches as before
    assert _search(store, "a2", NEW)[0] == "Alice keeps the spare keys of the studio"


def test_an_interrupted_reembed_still_refuses_and_a_second_run_moves_the_rest(store):
    _seed(store, "a1", OLD)

    def stop_after_first_batch(count: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.reembed(store, NEW, batch=4, progress=stop_after_first_batch)
    with pytest.raises(ConfigurationError, match="memoryctl reembed"):
        _search(store, "a1", NEW)
    assert runs.reembed(store, NEW, batch=4) == len(TEXTS) - 4
    assert _search(store, "a1", NEW)[0] == "Alice keeps the spare keys of the studio"
