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
        cls, terms: "dict[str, int] | TermTable", offsets: np.ndarray, rows: np.ndarray, tfs: np.ndarray,
        doc_len: np.ndarray, *, alphabet: str,
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
        for term in self._known(_one_edit(query_term, self.alphabet), prefix):
            if term in found or not (scoring.fuzzy_eligible(term) or term in deleted):
                continue
            edits = scoring.edit_distance(query_term, term)
            if edits <= scoring.FUZZY_MAX_EDITS:
                found[term] = scoring.fuzzy_weight(query_term, term, edits)
        return found

    def _known(self, candidates: Iterator[str], prefix: str) -> list[str]:
        """Those of ``candidates`` that start with ``prefix`` and are in the vocabulary, each
        once. Most candidates are not words, and a dict turns each away in one lookup: listing
        them all first doubled the time of a term (docs/benchmarks.md, "Search figures"). A
        mapped ``TermTable`` is searched once for all of them instead."""
        n = scoring.FUZZY_PREFIX_LENGTH
        if not isinstance(self.terms, TermTable):
            terms = self.terms
            return list(dict.fromkeys(t for t in candidates if t in terms and t[:n] == prefix))
        listed = [t for t in dict.fromkeys(candidates) if t[:n] == prefix]
        return [t for t, known in zip(listed, self.terms.contains_many(listed)) if known]


class TermTable:
    """Term -> term number, searched in place in sorted fixed-width arrays (which a segment
    file maps, shared by every process) instead of a dict rebuilt in each process. Terms
    longer than ``WIDTH`` bytes, rare, stay in a small dict."""

    WIDTH = 40

    def __init__(self, keys: np.ndarray, numbers: np.ndarray, overflow: dict[str, int]) -> None:
        self._keys, self._numbers, self._overflow = keys, numbers, overflow

    @classmethod
    def pack(cls, terms: dict[str, int]) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
        """Sorted keys, their numbers, and the terms too long for a key."""
        short = sorted((t.encode("utf-8"), n) for t, n in terms.items() if len(t.encode("utf-8")) <= cls.WIDTH)
        width = max((len(k) for k, _ in short), default=1)
        keys = np.array([k for k, _ in short], dtype=f"S{width}")
        numbers = np.array([n for _, n in short], dtype=np.int32)
        overflow = {t: n for t, n in terms.items() if len(t.encode("utf-8")) > cls.WIDTH}
        return keys, numbers, overflow

    def _index(self, raw: bytes) -> int:
        if len(raw) > self._keys.dtype.itemsize:
            return -1
        i = int(np.searchsorted(self._keys, raw))
        return i if i < len(self._keys) and self._keys[i] == raw else -1

    def __getitem__(self, term: str) -> int:
        raw = term.encode("utf-8")
        if len(raw) > self.WIDTH:
            return self._overflow[term]
        i = self._index(raw)
        if i < 0:
            raise KeyError(term)
        return int(self._numbers[i])

    def __contains__(self, term: object) -> bool:
        if not isinstance(term, str):
            return False
        raw = term.encode("utf-8")
        return term in self._overflow if len(raw) > self.WIDTH else self._index(raw) >= 0

    def contains_many(self, terms: Sequence[str]) -> list[bool]:
        """``term in self`` for each term, with one vectorized search of the keys."""
        raws = [t.encode("utf-8") for t in terms]
        width = self._keys.dtype.itemsize
        fits = [len(r) <= width for r in raws]
        out = [t in self._overflow for t in terms]
        probe = [r for r, ok in zip(raws, fits) if ok]
        if probe and len(self._keys):
            wanted = np.array(probe, dtype=self._keys.dtype)
            at = np.minimum(np.searchsorted(self._keys, wanted), len(self._keys) - 1)
            hits = iter((self._keys[at] == wanted).tolist())
            out = [next(hits) if ok else o for ok, o in zip(fits, out)]
        return out

    def __iter__(self) -> Iterator[str]:
        yield from (k.decode("utf-8") for k in self._keys.tolist())
        yield from self._overflow

    def __len__(self) -> int:
        return len(self._keys) + len(self._overflow)


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
