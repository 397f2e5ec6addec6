"""Memory in Portuguese, Spanish and German: the text branch folds accents (a query typed
without them finds the words written with them, as the same word and not as a typo), and
with the multilingual embedder an English question finds the fact through meaning."""

from datetime import timedelta

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings.e5 import E5Embedder
from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.service import MemoryService
from pipeline.search.atlas import SEARCH_ANALYZER
from pipeline.search.scoring import tokenize
from schemas.settings import Settings
from testkit.atlas_engine import _custom
from testkit.documents import T0, fact
from testkit.stores import sqlite_store  # noqa: F401  (the `store` fixture)

NOW = T0 + timedelta(days=1)

FACTS = {
    "pt": "A Ana mora em São Paulo e trabalha com informação pública na prefeitura.",
    "es": "El cumpleaños de Martín es el tres de junio; le encanta el pan dulce de su abuela.",
    "de": "Jürgen hat seine Größe für den neuen Anzug beim Schneider in München angegeben.",
    "en1": "Bob repaired the garden fence last weekend.",
    "en2": "The quarterly budget review moved to Thursday afternoon.",
    "en3": "Priya is learning to play the cello with a private teacher.",
}


def _remember(store, embedder, texts=FACTS):
    vectors = embedder.embed(list(texts.values())).vectors
    for (fid, content), vector in zip(texts.items(), vectors):
        store.facts.insert_fact(fact(fid, content, user=None, embedding=vector, model=embedder.model, formed=T0))
    store.leases.bump_scope_versions("a1", ["agent"])


def _search(store, embedder, query, **kwargs):
    service = MemoryService("a1", settings=Settings(_env_file=None), store=store, embedder=embedder,
                            clock=FrozenClock(NOW))
    return service.search_facts(query, user_id="u1", session_id="s1", **kwargs)


@pytest.mark.parametrize(("written", "typed", "expected"), [
    ("informação pública", "informacao publica", "pt"),
    ("São Paulo", "sao paulo", "pt"),
    ("cumpleaños Martín", "cumpleanos martin", "es"),
    ("Größe München", "grosse munchen", "de"),
    ("Jürgen", "Jurgen", "de"),
])
def test_a_query_in_the_facts_language_finds_it_alike_with_or_without_accents(store, written, typed, expected):
    embedder = HashingEmbedder(64)
    _remember(store, embedder)
    as_written = _search(store, embedder, written, debug=True)["debug"]["queries"][0]["text"]
    as_typed = _search(store, embedder, typed, debug=True)["debug"]["queries"][0]["text"]
    assert as_written[0]["id"] == expected
    assert as_typed == as_written  # the same terms, the same scores: no letter counted as a typo


def test_an_accented_word_scores_as_the_same_word_not_as_a_typo(store):
    embedder = HashingEmbedder(64)
    _remember(store, embedder, {"cafe": "Lena drinks her café at the corner bakery", "other": "Tom walks to work"})
    plain = _search(store, embedder, "cafe", debug=True)["debug"]["queries"][0]["text"]
    accented = _search(store, embedder, "café", debug=True)["debug"]["queries"][0]["text"]
    assert plain == accented and plain[0]["id"] == "cafe"


def test_english_terms_are_as_before_and_atlas_folds_as_the_local_index():
    english = "The painters painted paintings at Maya's studio in 2023, ref42."
    assert tokenize(english) == ["painter", "paint", "paint", "maya", "studio", "2023", "ref42"]
    analyze = _custom(SEARCH_ANALYZER)
    for text in [*FACTS.values(), "Ærø Łódź Øresund café NAÏVE façade"]:
        assert analyze(text) == tokenize(text)


@pytest.fixture(scope="module")
def e5():
    return E5Embedder(query_threads=1, batch_threads=2)


@pytest.mark.parametrize(("query", "expected"), [
    ("Which city does Ana live in?", "pt"),
    ("When is Martin's birthday?", "es"),
    ("What measurements did Jurgen give the tailor?", "de"),
])
def test_an_english_question_finds_a_fact_in_another_language_through_the_semantic_branch(store, e5, query, expected):
    _remember(store, e5)
    found = _search(store, e5, query, debug=True)
    semantic = found["debug"]["queries"][0]["semantic"]
    assert semantic[0]["id"] == expected and found["results"][0]["id"] == expected
