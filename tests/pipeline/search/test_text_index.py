"""The flat text index finds exactly what a deletion-key vocabulary found, in far less memory."""

import tracemalloc

import numpy as np
from hypothesis import given, settings, strategies as st

from pipeline.search import scoring
from pipeline.search.text_index import TermTable, TextIndex


def _deletion_key_matches(query_term, vocabulary):
    """The previous index, as the oracle: every fuzzy-eligible term under itself and each of
    its one-deletion keys, others under themselves only; candidates verified by distance."""
    keys: dict[str, set[str]] = {}
    for term in vocabulary:
        variants = {term}
        if scoring.fuzzy_eligible(term):
            variants |= {term[:i] + term[i + 1:] for i in range(len(term))}
        for key in variants:
            keys.setdefault(key, set()).add(term)
    candidates = set(keys.get(query_term, ()))
    if scoring.fuzzy_eligible(query_term):
        for i in range(len(query_term)):
            candidates |= keys.get(query_term[:i] + query_term[i + 1:], set())
    found = {}
    for term in candidates:
        if term == query_term:
            found[term] = 1.0
        elif scoring.fuzzy_eligible(query_term) and term[:1] == query_term[:1]:
            edits = scoring.edit_distance(query_term, term)
            if edits <= 1:
                found[term] = scoring.fuzzy_weight(query_term, term, edits)
    return found


_terms = st.text(alphabet="abcdeé12", min_size=1, max_size=7)


@settings(max_examples=300, deadline=None)
@given(vocabulary=st.lists(_terms, min_size=1, max_size=40), query=_terms)
def test_fuzzy_matching_equals_the_deletion_key_index(vocabulary, query):
    index = TextIndex([vocabulary])
    assert index.matches(query) == _deletion_key_matches(query, set(vocabulary))
    # the vocabulary as a segment file maps it (a sorted term table) looks terms up another way
    mapped = TextIndex.from_arrays(TermTable(*TermTable.pack(index.terms)), index.offsets, index.rows, index.tfs,
                                   index.doc_len, alphabet=index.alphabet)
    assert mapped.matches(query) == index.matches(query)


@settings(max_examples=100, deadline=None)
@given(vocabulary=st.lists(_terms, min_size=1, max_size=40), data=st.data())
def test_a_near_miss_of_a_vocabulary_term_finds_it(vocabulary, data):
    term = data.draw(st.sampled_from(vocabulary))
    index = TextIndex([vocabulary])
    assert index.matches(term)[term] == 1.0
    assert index.matches(term) == _deletion_key_matches(term, set(vocabulary))


def test_postings_hold_every_row_and_frequency():
    index = TextIndex([["mars", "budget", "mars"], ["budget"], [], ["mars"]])
    rows, tfs = index.postings("mars")
    assert rows.tolist() == [0, 3] and tfs.tolist() == [2.0, 1.0]
    assert index.doc_freq("budget") == 2
    assert index.doc_len.tolist() == [3.0, 1.0, 0.0, 1.0]


def test_the_index_of_100k_facts_with_rare_terms_stays_compact():
    rng = np.random.default_rng(0)
    common = [f"word{i}" for i in range(5000)]
    docs = [[common[j] for j in rng.integers(0, 5000, 9)] + [f"ref{i}"] for i in range(100_000)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = TextIndex(docs)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # 1M postings and 105k terms: flat arrays plus one dict entry per term (a dict of two
    # arrays per term and a deletion-key vocabulary held ~110 MB here)
    assert held < 20 * 2**20
    assert index.nbytes >= held * 0.7       # the cache's estimate does not undercount
