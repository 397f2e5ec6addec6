"""Score scales, BM25, typo tolerance and Reciprocal Rank Fusion (design §6). Pure.

Every search implementation reports its scores on these scales, so one set of thresholds
(settings, per embedding model) holds everywhere:

- semantic score = (1 + cosine) / 2, the scale Atlas reports for cosine vector indexes;
- text terms are case-folded words with their accents folded ("São" is "sao", "Größe"
  "grosse"), without stopwords, Snowball-stemmed;
- text score = BM25 with k1 = 1.2, b = 0.75 in the form Lucene (hence Atlas Search) computes:
  ``idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``;
  a query term also matches vocabulary terms one edit away (Damerau: insert, delete,
  substitute, transpose), weighted ``1 - edits / min(len)`` like Lucene's fuzzy query;
- the text threshold applies to the BM25 score times ``text_threshold_scale(n)`` for a store
  of n candidate facts, so that it means the same in a store of 5 facts as in one of 500;
- fusion = weighted Reciprocal Rank Fusion with 1-based ranks: ``sum(w / (k + rank))``, cut
  in ranks on the design's k (``rank_cut_passes``), so the cut does not move with a model's k.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import snowballstemmer

K1 = 1.2
B = 0.75
#: query terms shorter than this match exactly only (a typo in "cat" is another word)
FUZZY_MIN_LENGTH = 4
#: typo tolerance: at most this many edits, and the first letter must match (Atlas prefixLength 1)
FUZZY_MAX_EDITS = 1
FUZZY_PREFIX_LENGTH = 1

_WORD = re.compile(r"\w+", re.UNICODE)

#: function words dropped before BM25: in a question ("what did she say about ...") they
#: match every chatty fact and drown the content words (the Atlas analyzer drops the same)
STOPWORDS = frozenset("""
a an the and or but if of at by for with about to from in on into is are was were be been
being do does did have has had i you he she it we they me him her them my your his its our
their what which who whom this that these those am will would should can could not no so
than too very just there here when where why how all any both each few more most other some
such only own same s t don now
""".split())

# A snowballstemmer stemmer keeps its word in instance state while it works: one shared by
# threads (dedup's pool, search_facts' queries) returned wrong stems and raised IndexError.
_stemmers = threading.local()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Snowball (Porter2) English stem: "paintings", "painted" and "painting" meet. One
    stemmer per thread (a stemmer is not thread-safe)."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return stemmer.stemWord(word)


def words(text: str) -> list[str]:
    """The word tokens of ``text`` as written (what ``tokenize`` analyses)."""
    return _WORD.findall(text)


#: letters that carry no combining mark to drop but fold all the same (as ICU folding does)
_FOLD_LETTERS = str.maketrans({"ø": "o", "đ": "d", "ł": "l", "ħ": "h", "ı": "i", "æ": "ae", "œ": "oe", "þ": "th"})


@lru_cache(maxsize=200_000)
def fold_accents(word: str) -> str:
    """``word`` without its diacritics: a query typed without accents ("sao paulo",
    "informacao") meets the words written with them, as the same term, not as a typo."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word.translate(_FOLD_LETTERS))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokenize(text: str) -> list[str]:
    """Index terms: NFKC, case-folded word tokens, accents folded, stopwords dropped, stemmed
    (the same chain as the Atlas search index's custom analyzer, see ``atlas.SEARCH_ANALYZER``)."""
    words = [fold_accents(w) for w in _WORD.findall(unicodedata.normalize("NFKC", text).casefold())]
    # words only: codes, numbers and ids ("ref42", "2023") stay as they are
    return [stem(w) if w.isalpha() else w for w in words if w not in STOPWORDS]


# --------------------------------------------------------------------------- semantic -------
def semantic_score(cosine: float | np.ndarray) -> float | np.ndarray:
    """(1 + cosine) / 2: 1 for the same direction, 0.5 for orthogonal, 0 for opposite."""
    return (1.0 + cosine) / 2.0


# --------------------------------------------------------------------------- BM25 -----------
def bm25_idf(n_docs: int, doc_freq: int) -> float:
    """Lucene's always-positive BM25 idf."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


#: the store size the text threshold is stated at (LoCoMo dev: 369 to 663 facts per agent)
TEXT_THRESHOLD_DOCS = 500


def text_threshold_scale(n_docs: int) -> float:
    """What a BM25 score over ``n_docs`` documents is worth at ``TEXT_THRESHOLD_DOCS``.

    BM25's idf grows with the corpus: a term found in one fact of five weighs 1.1, in one of
    500 6.1, so an absolute threshold (1.5) is unreachable in a small store even for its
    rarest term ("Berlin" in "The user lives in Berlin"). Scaling by the ratio of the idf of
    a term found once at the reference size to that at ``n_docs`` makes the threshold mean
    the same at every size: a term rare in its store passes, a term in most of its facts
    still does not. Bigger stores are not scaled (1.0)."""
    return max(1.0, bm25_idf(TEXT_THRESHOLD_DOCS, 1) / bm25_idf(max(1, n_docs), 1))


def bm25_term_score(
    tf: float | np.ndarray, doc_len: float | np.ndarray, avg_len: float, idf: float,
    k1: float = K1, b: float = B,
) -> float | np.ndarray:
    """One term's BM25 contribution to a document (vectorized over documents)."""
    norm = k1 * (1.0 - b + b * (doc_len / avg_len if avg_len > 0 else 1.0))
    return idf * tf / (tf + norm)


# --------------------------------------------------------------------------- typos ----------
def edit_distance(a: str, b: str, limit: int = FUZZY_MAX_EDITS) -> int:
    """Optimal-string-alignment distance (Damerau with adjacent transpositions), or
    ``limit + 1`` as soon as it is known to exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] | None = None
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if prev2 is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1] if prev[-1] <= limit else limit + 1


def fuzzy_eligible(term: str) -> bool:
    return len(term) >= FUZZY_MIN_LENGTH and not term.isdigit()


def fuzzy_weight(query_term: str, term: str, edits: int) -> float:
    """How much a fuzzy match counts: 1 for the exact term, ``1 - edits / min(len)`` otherwise."""
    if edits == 0:
        return 1.0
    return max(0.0, 1.0 - edits / min(len(query_term), len(term)))


# --------------------------------------------------------------------------- fusion ---------
@dataclass(frozen=True)
class Fused:
    fact_id: str
    score: float
    ranks: dict[str, int]        # signal -> 1-based rank in that signal's list
    scores: dict[str, float]     # signal -> that signal's own score


#: the RRF k on which the fused cut is stated (design §6: 0.015 at k = 60 is one signal's rank 6)
CUT_K = 60


def rank_cut_passes(ranks: Mapping[str, int], depth: float, weights: Mapping[str, float] | None = None) -> bool:
    """Whether a fact with these 1-based ranks passes the fused cut of ``depth``: its RRF
    score on the design's k (``CUT_K``) reaches that of a fact found by one signal alone at
    rank ``depth``. The k that orders the results plays no part, so the cut means the same
    for every model: one signal alone passes down to ``depth``, and a fact found by both
    passes unless both ranks are deep (past rank 72 each for ``depth`` 6)."""
    total = sum((1.0 if weights is None else weights.get(s, 1.0)) / (CUT_K + r) for s, r in ranks.items())
    # the tolerance keeps rank == depth in: the two sides are summed in different orders
    return total >= 1.0 / (CUT_K + depth) - 1e-12


def rrf(
    rankings: Mapping[str, Sequence[tuple[str, float]]],
    *,
    k: float,
    weights: Mapping[str, float] | None = None,
    min_score: float | None = None,
    depth: float | None = None,
) -> list[Fused]:
    """Fuse best-first lists of (id, score) per signal. Best first; ties by id for stability.

    ``weights`` defaults to 1 per signal. Two cuts, each None to keep everything: ``depth``
    (``rank_cut_passes``, the same for every k) and ``min_score``, a raw fused score.
    """
    fused: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    scores: dict[str, dict[str, float]] = {}
    for signal, ranked in rankings.items():
        weight = 1.0 if weights is None else weights.get(signal, 1.0)
        for rank, (fact_id, score) in enumerate(ranked, start=1):
            fused[fact_id] = fused.get(fact_id, 0.0) + weight / (k + rank)
            ranks.setdefault(fact_id, {})[signal] = rank
            scores.setdefault(fact_id, {})[signal] = score
    out = [
        Fused(fact_id, value, ranks[fact_id], scores[fact_id])
        for fact_id, value in fused.items()
        if (min_score is None or value >= min_score)
        and (depth is None or rank_cut_passes(ranks[fact_id], depth, weights))
    ]
    out.sort(key=lambda f: (-f.score, f.fact_id))
    return out


def passes(score: float, threshold: float | None) -> bool:
    return threshold is None or score >= threshold


def merge_best(lists: Iterable[Sequence[Fused]]) -> list[Fused]:
    """Merge several queries' fused lists by id, keeping each id's best entry; best first."""
    best: dict[str, Fused] = {}
    for fused in lists:
        for item in fused:
            held = best.get(item.fact_id)
            if held is None or item.score > held.score:
                best[item.fact_id] = item
    return sorted(best.values(), key=lambda f: (-f.score, f.fact_id))
