"""Where a new fact was said, and the text its embedding is made of (design §6). Pure.

A fact is embedded as ``retrieval_text(content, excerpt=..., date=...)``, the same treatment
the LoCoMo retrieval benchmark gives its turns (``bench/locomo_retrieval.py``): the
fact joined to its provenance. The content of the fact itself is unchanged.

- Source message: among the claimed messages, the one that best matches the fact as a BM25
  query over those messages alone (the search's own terms: stemmed, without stopwords; the
  speaker's name counts as said in their message); ties go to the latest. It becomes the
  fact's ``source_message_ids``, the most specific provenance a run has. A fact's rare words
  ("LGBTQ conference") name its message, where a plain overlap ratio (Dice) favoured a short
  reply sharing its common words ("so glad you felt accepted"): on LoCoMo dev, 0.830 of
  the observation items map to their evidence turn, against 0.765 with Dice
  (docs/benchmarks.md "Recall through the formation chain").
- Excerpt: the ``EXCERPT_TURNS`` messages just before the source message in its session
  (earlier runs' messages count), then the source message itself, one ``Name: text`` line
  each. In LoCoMo the fact *is* the turn, so its excerpt is only the turns before it; here
  the fact is a rewrite of the source message, so the source line is part of the excerpt.
  Each line is cut at ``MAX_LINE_CHARS``, and the whole text is budgeted by the embedder's
  own tokenizer (``retrieval_text``): the fact whole, then the nearest lines first.
- Date: the source message's, in the benchmark's form (``9:04 am on 2 March, 2026``).

Dedup compares contents, not these vectors (``pipeline.formation.candidates``): the stored
(retrieval-text) vectors only shortlist candidates, with BM25 on the content beside them, and
each shortlisted fact is scored content vector to content vector at ≥ 0.7. A bare-content
query against the stored vectors misses a correction said in another session when the old
fact's excerpt was about something else (``tests/pipeline/formation/test_dedup_candidates.py``),
and two unrelated facts of the same conversation, which share excerpt lines and dates, would
pass 0.7 if both sides carried their provenance (``tests/pipeline/formation/test_provenance.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pipeline.conversation import ordered, speaker, user_name
from pipeline.embeddings.port import Embedder
from pipeline.retrieval import retrieval_text
from pipeline.search import scoring
from schemas.documents import StoredMessage

#: messages before the source message joined to a fact (as ``EXCERPT_TURNS`` in LoCoMo)
EXCERPT_TURNS = 2
MAX_LINE_CHARS = 400


@dataclass(frozen=True)
class Provenance:
    """A fact's source message and what its embedding is made of."""

    message_id: str
    excerpt: tuple[str, ...]
    date: str

    def text(self, content: str, embedder: Embedder | None = None) -> str:
        """The retrieval text of ``content``; with ``embedder``, within its window."""
        return retrieval_text(content, excerpt=self.excerpt, date=self.date, embedder=embedder)


def _terms(message: StoredMessage, user_names: Mapping[str, str] | None) -> list[str]:
    """A message's search terms; a user's message also holds the user's name: a fact names
    the person who said "I" ("I live in Lisbon" → "Maya Chen lives in Lisbon")."""
    name = user_name(message, user_names) if message.role == "user" else ""
    return scoring.tokenize(message.content) + scoring.tokenize(name)


class _Corpus:
    """The claimed messages as a BM25 corpus, tokenized once for every fact of a run."""

    def __init__(self, messages: Sequence[StoredMessage], user_names: Mapping[str, str] | None) -> None:
        docs = [_terms(m, user_names) for m in messages]
        self.counts = [Counter(doc) for doc in docs]
        self.lengths = [len(doc) for doc in docs]
        self.avg = sum(self.lengths) / len(docs) if docs else 0.0
        freq = Counter(term for doc in docs for term in set(doc))
        self.idf = {term: scoring.bm25_idf(len(docs), n) for term, n in freq.items()}

    def scores(self, fact: str) -> list[float]:
        """BM25 of ``fact`` as a query against each message."""
        query = set(scoring.tokenize(fact))
        return [
            sum(float(scoring.bm25_term_score(counts[t], length, self.avg, self.idf[t])) for t in query if counts[t])
            for counts, length in zip(self.counts, self.lengths)
        ]

    def best(self, fact: str) -> int:
        """Index of the message the fact matches best; ties go to the latest."""
        best, best_score = len(self.counts) - 1, -1.0
        for i, score in enumerate(self.scores(fact)):
            if score >= best_score:
                best, best_score = i, score
        return best


def source_index(
    fact: str, messages: Sequence[StoredMessage], user_names: Mapping[str, str] | None = None,
) -> int:
    """Index in ``messages`` of the one the fact matches best; ties go to the latest."""
    return _Corpus(messages, user_names).best(fact)


def message_line(message: StoredMessage, user_names: Mapping[str, str] | None = None) -> str:
    """``Name: text`` on one line: the user's name, or the assistant's label and name."""
    name = user_name(message, user_names) if message.role == "user" else speaker(message, user_names)
    text = " ".join(message.content.split())
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS].rstrip() + "…"
    return f"{name}: {text}"


def format_date(value: datetime) -> str:
    """``9:04 am on 2 March, 2026`` (UTC), the form of LoCoMo's session dates."""
    at = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    hour = at.hour % 12 or 12
    return f"{hour}:{at.minute:02d} {'am' if at.hour < 12 else 'pm'} on {at.day} {at.strftime('%B')}, {at.year}"


def provenance(
    fact: str, claimed: Sequence[StoredMessage], before: Sequence[StoredMessage] = (),
    user_names: Mapping[str, str] | None = None,
) -> Provenance:
    """The provenance of ``fact`` among the ``claimed`` messages; ``before`` are earlier
    messages of the session, used only as excerpt lines. ``claimed`` must not be empty."""
    return provenances([fact], claimed, before, user_names)[0]


def provenances(
    facts: Sequence[str], claimed: Sequence[StoredMessage], before: Sequence[StoredMessage] = (),
    user_names: Mapping[str, str] | None = None,
) -> list[Provenance]:
    """``provenance`` of each of ``facts``, the messages read once for all of them."""
    claimed = ordered(claimed)
    corpus = _Corpus(claimed, user_names)
    session = ordered([*before, *claimed])
    position: dict[str, int] = {}
    for i, m in enumerate(session):
        position.setdefault(m.message_id, i)
    out = []
    for fact in facts:
        source = claimed[corpus.best(fact)]
        at = position[source.message_id]
        lines = [message_line(m, user_names) for m in session[max(0, at - EXCERPT_TURNS):at + 1]]
        out.append(Provenance(source.message_id, tuple(lines), format_date(source.created_at)))
    return out
