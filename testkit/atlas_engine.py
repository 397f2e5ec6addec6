"""What the Mongo test emulation computes for ``$vectorSearch`` and ``$search`` once the
stage has passed ``atlas_rules``: exact nearest neighbours with the index's similarity, and
Lucene-style BM25 over the analyzer the index declares, with Lucene's fuzzy term expansion.

It is written from the documentation, independently of ``pipeline.search``, so that a test
comparing the two compares the pipeline with Atlas's rules, not with itself:
- scores: https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-stage/
  ("Atlas Vector Search Score": cosine and dotProduct (1 + x) / 2, euclidean 1 / (1 + d));
- BM25: https://www.mongodb.com/docs/atlas/atlas-search/score/get-details/ (Lucene's BM25,
  k1 1.2, b 0.75; Lucene's one-byte length norm is not emulated);
- fuzzy: https://www.mongodb.com/docs/atlas/atlas-search/text/ (maxEdits, prefixLength,
  maxExpansions; Damerau-Levenshtein), a match weighted like Lucene's ``FuzzyTermsEnum``
  boost ``1 - edits / min(len)``;
- analyzers: https://www.mongodb.com/docs/atlas/atlas-search/analyzers/custom/ (the standard
  tokenizer approximated by word characters; icuNormalizer, lowercase, icuFolding, stopword
  and snowballStemming filters).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Any

import numpy as np
import snowballstemmer

K1, B = 1.2, 0.75
_WORD = re.compile(r"\w+", re.UNICODE)
#: lucene.english's stopwords (Lucene EnglishAnalyzer.ENGLISH_STOP_WORDS_SET)
_ENGLISH_STOP = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their "
                          "then there these they this to was will with".split())


# --------------------------------------------------------------------------- vectors --------
def vector_score(similarity: str, query: np.ndarray, vector: np.ndarray) -> float:
    if similarity == "euclidean":
        return float(1.0 / (1.0 + np.linalg.norm(query - vector)))
    if similarity == "dotProduct":
        return float((1.0 + query @ vector) / 2.0)
    norms = float(np.linalg.norm(query) * np.linalg.norm(vector))
    return float((1.0 + (query @ vector) / norms) / 2.0) if norms else 0.0


# --------------------------------------------------------------------------- analysis -------
def analyzer_for(definition: dict[str, Any], path: str):
    """The analyzer the index applies to ``path``: the field's, else the index's, else
    lucene.standard."""
    mapped = definition["mappings"].get("fields", {}).get(path) or {}
    if isinstance(mapped, list):
        mapped = mapped[0] if mapped else {}
    name = mapped.get("searchAnalyzer") or mapped.get("analyzer") or definition.get("searchAnalyzer") \
        or definition.get("analyzer") or "lucene.standard"
    custom = {a["name"]: a for a in definition.get("analyzers", [])}
    if name in custom:
        return _custom(custom[name])
    if name == "lucene.standard":
        return lambda text: [w.lower() for w in _words(text)]
    if name == "lucene.english":
        stemmer = snowballstemmer.stemmer("english")
        return lambda text: [stemmer.stemWord(w) for w in (w.lower() for w in _words(text)) if w not in _ENGLISH_STOP]
    raise NotImplementedError(f"the Atlas emulation does not implement the analyzer {name!r}")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


_UTR30_LETTERS = str.maketrans({"ø": "o", "đ": "d", "ł": "l", "ħ": "h", "ı": "i", "æ": "ae", "œ": "oe", "þ": "th"})


def _icu_fold(token: str) -> str:
    """UTR #30 folding as far as Latin script goes: case, compatibility forms and diacritics."""
    decomposed = unicodedata.normalize("NFKD", token.casefold().translate(_UTR30_LETTERS))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _custom(spec: dict[str, Any]):
    if spec.get("tokenizer", {}).get("type") != "standard" or spec.get("charFilters"):
        raise NotImplementedError(f"the Atlas emulation implements the standard tokenizer only ({spec['name']})")
    steps = []
    for f in spec.get("tokenFilters", []):
        kind = f["type"]
        if kind == "icuNormalizer":
            form = f.get("normalizationForm", "nfc").upper()
            steps.append(lambda toks, form=form: [unicodedata.normalize(form, t) for t in toks])
        elif kind == "lowercase":
            steps.append(lambda toks: [t.lower() for t in toks])
        elif kind == "icuFolding":
            # https://www.mongodb.com/docs/atlas/atlas-search/analyzers/token-filters/#icufolding:
            # "character folding from Unicode Technical Report #30 such as accent removal, case
            # folding, canonical duplicates folding"
            steps.append(lambda toks: [_icu_fold(t) for t in toks])
        elif kind == "stopword":
            ignore = f.get("ignoreCase", True)
            stop = {t.lower() for t in f["tokens"]} if ignore else set(f["tokens"])
            steps.append(lambda toks, stop=stop, ignore=ignore: [t for t in toks if (t.lower() if ignore else t) not in stop])
        elif kind == "snowballStemming":
            stemmer = snowballstemmer.stemmer(f["stemmerName"])
            steps.append(lambda toks, stemmer=stemmer: [stemmer.stemWord(t) for t in toks])
        else:
            raise NotImplementedError(f"the Atlas emulation does not implement the token filter {kind!r}")

    def analyze(text: str) -> list[str]:
        tokens = _words(text)
        for step in steps:
            tokens = step(tokens)
        return tokens

    return analyze


# --------------------------------------------------------------------------- text scoring ---
class TextField:
    """One path's inverted index over the documents the search index currently holds."""

    def __init__(self, docs: list[dict[str, Any]], path: str, analyze) -> None:
        self.analyze = analyze
        self.terms: list[Counter] = []
        for doc in docs:
            value = doc.get(path)
            self.terms.append(Counter(analyze(value)) if isinstance(value, str) else Counter())
        with_field = [t for t in self.terms if t]
        self.n_docs = len(with_field)
        self.avg_len = (sum(sum(t.values()) for t in with_field) / self.n_docs) if self.n_docs else 0.0
        self.doc_freq: Counter = Counter()
        for t in with_field:
            self.doc_freq.update(t.keys())

    def scores(self, query: str | list[str], fuzzy: dict[str, Any] | None) -> tuple[list[bool], list[float]]:
        """Per document: whether any query term matched, and the summed BM25 of every query
        term's best match."""
        queries = [query] if isinstance(query, str) else list(query)
        matched = [False] * len(self.terms)
        out = [0.0] * len(self.terms)
        for text in queries:
            for q in self.analyze(text):
                expansions = self._expand(q, fuzzy)
                for row, terms in enumerate(self.terms):
                    best = None
                    length = sum(terms.values())
                    for term, boost in expansions.items():
                        tf = terms.get(term, 0)
                        if tf:
                            score = boost * self._bm25(tf, length, term)
                            best = score if best is None else max(best, score)
                    if best is not None:
                        matched[row] = True
                        out[row] += best
        return matched, out

    def _bm25(self, tf: int, length: int, term: str) -> float:
        df = self.doc_freq[term]
        idf = math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))
        norm = K1 * (1.0 - B + B * (length / self.avg_len if self.avg_len else 1.0))
        return idf * tf / (tf + norm)

    def _expand(self, q: str, fuzzy: dict[str, Any] | None) -> dict[str, float]:
        if fuzzy is None:
            return {q: 1.0}
        max_edits = fuzzy.get("maxEdits", 2)
        prefix = fuzzy.get("prefixLength", 0)
        max_expansions = fuzzy.get("maxExpansions", 50)
        found = []
        for term in self.doc_freq:
            if term[:prefix] != q[:prefix]:
                continue
            edits = osa_distance(q, term, max_edits)
            if edits <= max_edits:
                boost = 1.0 if edits == 0 else max(0.0, 1.0 - edits / min(len(q), len(term)))
                found.append((-boost, term))
        found.sort()
        return {term: -neg for neg, term in found[:max_expansions]}


def osa_distance(a: str, b: str, limit: int) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance, ``limit + 1`` past the limit."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return min(rows[-1][-1], limit + 1)
