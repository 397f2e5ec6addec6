"""The text branch reads a fact's content, the texts it replaced and its source message
(``Fact.search_text``): a rewrite by the extraction model drops the words people used."""

from datetime import timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.local import LocalEmbedder
from pipeline.service import MemoryService
from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

NOW = T0 + timedelta(days=1)


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def _remember(store, embedder, fid, content, source=None, user="u1"):
    store.facts.insert_fact(fact(fid, content, user=user, embedding=embedder.embed([content]).vectors[0],
                           model=embedder.model, formed=T0).model_copy(update={"source_text": source}))
    store.leases.bump_scope_versions("a1", [f"user:{user}" if user else "agent"])


def _search(store, embedder, query, **kwargs):
    service = MemoryService("a1", settings=Settings(_env_file=None), store=store, embedder=embedder,
                            clock=FrozenClock(NOW))
    return service.search_facts(query, user_id="u1", session_id="s1", **kwargs)


def test_a_word_said_only_in_the_source_message_finds_the_fact(store, embedder):
    _remember(store, embedder, "dog", "Maya adopted a dog from the shelter",
              "Maya: We adopted a rescue greyhound from the shelter on Saturday!")
    _remember(store, embedder, "tea", "Maya likes green tea", "Maya: Green tea for me, always.")
    found = _search(store, embedder, "greyhound", debug=True)
    assert [h["id"] for h in found["debug"]["queries"][0]["text"]] == ["dog"]
    assert found["results"][0]["content"] == "Maya adopted a dog from the shelter"   # the content is shown


def test_where_someone_lives_now_finds_the_corrected_residence_before_facts_that_only_share_the_name(store, embedder):
    # the demo's store: Maya's name is in most facts, her email fact holds it twice
    _remember(store, embedder, "email", "Maya Chen's work email is maya.chen@lumenlabs.example",
              "Maya Chen: Send the draft to maya.chen@lumenlabs.example")
    _remember(store, embedder, "job", "Maya Chen is the product manager at Lumen Labs",
              "Maya Chen: I'm the product manager at Lumen Labs.")
    _remember(store, embedder, "train", "Maya Chen will take the train down on March 20",
              "Maya Chen: I'll take the train down on March 20.")
    _remember(store, embedder, "home", "Maya Chen lives in Lisbon",
              "Maya Chen: I live in Lisbon, so I can visit venues in person this week.")
    for i, text in enumerate(["The launch venue is Fabrica Braco de Prata", "Our total budget is 12,000 euros",
                              "Tom and Priya are joining the launch planning"]):
        _remember(store, embedder, f"agent{i}", text, user=None)
    moved = "Maya Chen moved from Lisbon to Porto last weekend"
    assert store.facts.update_fact("home", FactUpdate(
                             content=moved, hash=text_hash(moved), embedding=embedder.embed([moved]).vectors[0],
                             embedding_model=embedder.model, run_id="r2", now=NOW,
                             source_text="Maya Chen: Quick update about me: I moved from Lisbon to Porto last weekend."))
    store.leases.bump_scope_versions("a1", ["user:u1"])
    found = _search(store, embedder, "Where does Maya live now?")
    assert found[0]["content"] == moved
