"""A store of a handful of facts finds a fact by its one distinctive word (design §6)."""

from datetime import timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.local import LocalEmbedder
from pipeline.errors import TransientError
from pipeline.publisher import Publisher
from pipeline.retrieval import retrieval_text
from pipeline.search import scoring
from pipeline.service import MemoryService
from schemas.settings import Settings
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)


class _NoPublisher(Publisher):
    def publish(self, events):
        raise AssertionError("searching publishes nothing")


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def _remember(store, embedder, fid, content, excerpt):
    text = retrieval_text(content, excerpt=excerpt, date="9:04 am on 2 March, 2026", embedder=embedder)
    store.facts.insert_fact(fact(fid, content, user="u1", embedding=embedder.embed([text]).vectors[0],
                           model=embedder.model, formed=T0))
    store.leases.bump_scope_versions("a1", ["user:u1"])


def test_a_one_word_query_finds_its_fact_in_a_store_of_two(store, embedder):
    _remember(store, embedder, "f1", "The user lives in Berlin", [
        "Assistant: Where are you based these days, so I can suggest events nearby?",
        "Dana: I moved last spring, I live in Berlin now, close to the canal.",
    ])
    _remember(store, embedder, "f2", "The user's name is Dana", [
        "Assistant: Hello! What should I call you?", "Dana: Call me Dana, please.",
    ])
    service = MemoryService("a1", settings=Settings(_env_file=None), store=store, embedder=embedder,
                            publisher=_NoPublisher(), clock=FrozenClock(T0 + timedelta(days=1)))
    found = service.search_facts("Berlin", user_id="u1", session_id="s1")
    assert [r["content"] for r in found][:1] == ["The user lives in Berlin"]
    asked = service.search_facts("Which city does the user live in?", user_id="u1", session_id="s1")
    assert "The user lives in Berlin" in [r["content"] for r in asked]


def test_the_text_threshold_scales_with_the_store_and_not_past_the_reference_size():
    assert scoring.text_threshold_scale(2) > scoring.text_threshold_scale(20) > scoring.text_threshold_scale(200) > 1
    assert scoring.text_threshold_scale(scoring.TEXT_THRESHOLD_DOCS) == 1.0
    assert scoring.text_threshold_scale(100_000) == 1.0
    # a term in one fact of five, matched once in an average-length fact, passes 1.5 scaled
    once = scoring.bm25_term_score(1.0, 5.0, 5.0, scoring.bm25_idf(5, 1))
    assert once < 1.5 <= once * scoring.text_threshold_scale(5)
    # a term in every fact of five does not
    everywhere = scoring.bm25_term_score(1.0, 5.0, 5.0, scoring.bm25_idf(5, 5))
    assert everywhere * scoring.text_threshold_scale(5) < 1.5


class _DownEmbedder:
    """The real model for storing; down at search time (the search answers from text alone)."""

    def __init__(self, model):
        self.model, self.dim, self.window = model.model, model.dim, model.window

    def embed(self, texts):
        raise TransientError("the embedding provider is down")


def test_the_text_branch_alone_finds_a_rare_word_in_a_small_store(store, embedder):
    for i, (content, line) in enumerate([
        ("The user lives in Berlin", "Dana: I live in Berlin now."),
        ("The user's name is Dana", "Dana: Call me Dana."),
        ("The user works as a nurse", "Dana: I work night shifts as a nurse."),
    ]):
        _remember(store, embedder, f"f{i}", content, [line])
    service = MemoryService("a1", settings=Settings(_env_file=None), store=store, embedder=_DownEmbedder(embedder),
                            publisher=_NoPublisher(), clock=FrozenClock(T0 + timedelta(days=1)))
    assert [r["content"] for r in service.search_facts("Berlin", user_id="u1", session_id="s1")] == [
        "The user lives in Berlin"]
    # a word in every fact of the store is not distinctive: it passes no threshold alone
    assert service.search_facts("user", user_id="u1", session_id="s1") == []
