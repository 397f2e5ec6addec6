"""The retrieval text of a fact fits the embedder's window with the fact whole (design §6)."""

import numpy as np
import pytest

from pipeline.embeddings.hashing import HashingEmbedder
from pipeline.embeddings.local import LocalEmbedder
from pipeline.retrieval import retrieval_text

FACT = "Maya Chen lives in Lisbon with her two cats"
PARAGRAPH = (
    "Sure, here is a detailed plan for your sourdough starter. Mix equal weights of flour and water, "
    "keep it somewhere warm, and feed it every twelve hours by discarding half and adding fresh flour "
    "and water. After five to seven days it should double within six hours of a feeding, smell "
    "pleasantly sour and be full of bubbles. Rye flour speeds things up. "
)
LONG = [f"{who}: {(PARAGRAPH * 8)[:2000]}" for who in ("Assistant", "Maya Chen", "Assistant")]
DATE = "9:04 am on 2 March, 2026"


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder()


def test_a_fact_behind_three_long_messages_keeps_its_own_vector(local):
    text = retrieval_text(FACT, excerpt=LONG, date=DATE, embedder=local)
    vector, bare, excerpt = np.array(local.embed([text, FACT, "\n".join(LONG)]).vectors)
    assert float(vector @ bare) > float(vector @ excerpt)


def test_the_fact_comes_whole_then_its_date_then_the_nearest_line(local):
    text = retrieval_text(FACT, excerpt=LONG, date=DATE, embedder=local)
    assert text.startswith(f"[{DATE}] Assistant: Sure, here")  # the nearest message, cut
    assert text.endswith("…\n" + FACT)
    # provenance takes at most twice the fact's tokens: the fact stays most of its vector
    assert local.count_tokens(text) <= 3 * local.count_tokens(FACT) + 1 <= local.window


def test_a_short_excerpt_is_kept_whole(local):
    fact = "Maya Chen moved from Porto to Lisbon in May 2025 and now rents a flat in Alfama"
    excerpt = ["Juniper: Where do you live now?", "Maya Chen: Lisbon, since May."]
    text = retrieval_text(fact, excerpt=excerpt, date=DATE, embedder=local)
    assert text == f"[{DATE}] Juniper: Where do you live now?\nMaya Chen: Lisbon, since May.\n{fact}"


def test_a_fact_longer_than_the_window_is_embedded_alone(local):
    fact = "Maya Chen " + "visited Lisbon and Porto " * 80
    assert retrieval_text(fact, excerpt=LONG, date=DATE, embedder=local) == fact


def test_the_local_count_is_the_model_tokenizer_and_others_estimate(local):
    assert local.count_tokens("Lisbon") == 1 and local.count_tokens("unbelievably") > 1
    hashing = HashingEmbedder(64)
    assert hashing.count_tokens("x" * 300) == 100 and hashing.window >= 2048
    assert retrieval_text(FACT, excerpt=LONG, date=DATE, embedder=hashing).endswith(FACT)
