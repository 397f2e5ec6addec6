"""The inverted index of one search segment, laid out flat (compressed sparse rows).

One dict maps each vocabulary term to its number; the postings of every term sit in two
arrays (row indices, int32, and term frequencies, uint16), delimited by one offsets array.
A dict of two numpy arrays per term costs ~300 bytes of Python objects per term, and a
precomputed deletion-key vocabulary for typo tolerance cost several Python strings more per
term: at 100k facts, each with a few rare terms (names, numbers, ids), that was most of a
segment's memory. Here typo tolerance is computed at query time instead: the strings one
edit away from a query term (same first letter, over the vocabulary's own alphabet) are looked
up in the term dict, a few hundred lookups per query term.

Which terms match a query term is exactly ``pipeline.search.scoring``'s rule: the term itself;
and, for a query term of ``FUZZY_MIN_LENGTH``+ letters that is not a number, every term one
optimal-string-alignment edit away with the same first letter, where the vocabulary term is
itself fuzzy-eligible or is the query term with one letter deleted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from pipeline.search import scoring


class TextIndex:
    """Term -> (row indices, term frequencies) over a segment's contents, and document lengths."""

    __slots__ = ("terms", "offsets", "rows", "tfs", "doc_len", "alphabet")

    @classmethod
    def from_contents(cls, contents: Sequence[str]) -> "TextIndex":
        """The index of texts, through ``scoring.tokenize`` (the terms a query is cut into)."""
        tokenize = scoring.tokenize
        return cls(tokenize(content) for content in contents)

    @classmethod
    def from_arrays(
        cls, terms: dict[str, int], offsets: np.ndarray, rows: np.ndarray, tfs: np.ndarray, doc_len: np.ndarray,
        *, alphabet: str,
    ) -> "TextIndex":
        """An index whose arrays were built before (``pipeline.search.segment_files`` maps them)."""
        index = cls.__new__(cls)
        index.terms, index.offsets, index.rows, index.tfs, index.doc_len = terms, offsets, rows, tfs, doc_len
        index.alphabet = alphabet
        return index

    def __init__(self, documents: Iterable[Sequence[str]]) -> None:
        """The index of documents given as their terms."""
        terms: dict[str, int] = {}
        term_ids: list[int] = []
        rows: list[int] = []
        tfs: list[int] = []
        lengths: list[int] = []
        for row, tokens in enumerate(documents):
            lengths.append(len(tokens))
            for term, tf in Counter(tokens).items():
                term_ids.append(terms.setdefault(term, len(terms)))
                rows.append(row)
                tfs.append(tf)
        order = np.argsort(np.asarray(term_ids, dtype=np.int32), kind="stable")
        counts = np.bincount(np.asarray(term_ids, dtype=np.int64), minlength=len(terms))
        self.terms = terms
        self.offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.rows = np.asarray(rows, dtype=np.int32)[order]
        self.tfs = np.minimum(np.asarray(tfs, dtype=np.int64), np.iinfo(np.uint16).max).astype(np.uint16)[order]
        self.doc_len = np.asarray(lengths, dtype=np.float32)
        self.alphabet = "".join(sorted({ch for term in terms for ch in term}))

    @property
    def nbytes(self) -> int:
        """Memory held: the arrays, and ~90 bytes per term for its string and dict entry."""
        arrays = self.offsets.nbytes + self.rows.nbytes + self.tfs.nbytes + self.doc_len.nbytes
        return arrays + sum(49 + len(term) for term in self.terms) + 40 * len(self.terms)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and term frequencies (float32) of ``term``, which must be in the index."""
        i = self.terms[term]
        start, end = self.offsets[i], self.offsets[i + 1]
        return self.rows[start:end], self.tfs[start:end].astype(np.float32)

    def doc_freq(self, term: str) -> int:
        i = self.terms[term]
        return int(self.offsets[i + 1] - self.offsets[i])

    def matches(self, query_term: str) -> dict[str, float]:
        """Vocabulary terms matching ``query_term`` and their weights (``scoring.fuzzy_weight``)."""
        found: dict[str, float] = {}
        if query_term in self.terms:
            found[query_term] = 1.0
        if not scoring.fuzzy_eligible(query_term):
            return found
        deleted = {query_term[:i] + query_term[i + 1:] for i in range(len(query_term))}
        prefix = query_term[:scoring.FUZZY_PREFIX_LENGTH]
        for term in _one_edit(query_term, self.alphabet):
            if term in found or term not in self.terms or term[:scoring.FUZZY_PREFIX_LENGTH] != prefix:
                continue
            if not (scoring.fuzzy_eligible(term) or term in deleted):
                continue
            edits = scoring.edit_distance(query_term, term)
            if edits <= scoring.FUZZY_MAX_EDITS:
                found[term] = scoring.fuzzy_weight(query_term, term, edits)
        return found


def _one_edit(word: str, alphabet: str) -> Iterator[str]:
    """Every string one deletion, adjacent transposition, substitution or insertion away from
    ``word`` that keeps its first letter (an edit there can only match with that letter)."""
    n = len(word)
    for i in range(n):
        yield word[:i] + word[i + 1:]
    for i in range(n - 1):
        yield word[:i] + word[i + 1] + word[i] + word[i + 2:]
    for i in range(1, n + 1):
        head, tail = word[:i], word[i:]
        for ch in alphabet:
            yield head + ch + tail
            if tail:
                yield head + ch + tail[1:]
