"""The local model is semantic: paraphrases score clearly above unrelated pairs (design §8).

The same criterion is run against the hashing embedder, which must NOT meet it: it sees
spelling, not meaning, so the test can tell a semantic model from a lexical one.
"""

import numpy as np
import pytest

from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.embeddings.local import LocalEmbedder

MARGIN = 0.2

PARAPHRASES = [
    ("Alice's email address is alice@example.com.", "You can reach Alice by mail at alice@example.com."),
    ("The user owns a golden retriever called Max.", "Max is the name of their dog, a retriever."),
    ("Bob works as a nurse at the city hospital.", "Robert is employed in healthcare, caring for patients in a clinic."),
    ("The meeting was moved to Friday afternoon.", "We rescheduled the appointment for late on Friday."),
    ("I am allergic to peanuts.", "Eating nuts gives me a severe reaction."),
    ("Our startup raised two million dollars in seed funding.", "The company secured $2M from early investors."),
    ("She plays the violin in an orchestra.", "She is a string musician performing with a symphony."),
    ("The flight to Tokyo departs at 9 am.", "The plane for Japan leaves in the morning at nine."),
]

UNRELATED = [
    ("Alice's email address is alice@example.com.", "The recipe needs three cups of flour."),
    ("The user owns a golden retriever called Max.", "Quarterly tax filings are due in April."),
    ("Bob works as a nurse at the city hospital.", "The volcano last erupted in 1980."),
    ("The meeting was moved to Friday afternoon.", "Penguins live in the southern hemisphere."),
    ("I am allergic to peanuts.", "The server cluster runs on Kubernetes."),
    ("Our startup raised two million dollars in seed funding.", "The cat sleeps on the windowsill."),
    ("She plays the violin in an orchestra.", "Mortgage rates rose by half a percent."),
    ("The flight to Tokyo departs at 9 am.", "He repainted the garden fence green."),
]


def _mean_semantic_score(embedder, pairs):
    left = np.array(embedder.embed([a for a, _ in pairs]).vectors)
    right = np.array(embedder.embed([b for _, b in pairs]).vectors)
    cosine = (left * right).sum(axis=1)
    return float(((1 + cosine) / 2).mean())


def _margin(embedder):
    return _mean_semantic_score(embedder, PARAPHRASES) - _mean_semantic_score(embedder, UNRELATED)


@pytest.mark.parametrize(
    ("make", "semantic"),
    [(LocalEmbedder, True), (lambda: HashingEmbedder(384), False)],
    ids=["local-model-is-semantic", "hashing-is-not"],
)
def test_paraphrases_score_clearly_above_unrelated_pairs_only_for_a_semantic_model(make, semantic):
    margin = _margin(make())
    assert (margin >= MARGIN) is semantic, f"margin {margin:.3f}"
