import numpy as np
import pytest

from pipeline.embeddings.hashing import HashingEmbedder


def test_vectors_are_unit_length_with_the_configured_dimension_and_model_name():
    result = HashingEmbedder(128).embed(["Alice lives in Berlin.", "The office opens at nine."])
    assert result.model == "hashing-128" and result.dim == 128
    assert np.allclose(np.linalg.norm(np.array(result.vectors), axis=1), 1.0)


def test_the_same_text_always_gets_the_same_vector_across_instances():
    assert HashingEmbedder().embed(["Alice lives in Berlin."]).vectors == HashingEmbedder().embed(["Alice lives in Berlin."]).vectors


def test_texts_sharing_words_score_higher_than_texts_sharing_none():
    a, b, c = np.array(HashingEmbedder().embed(
        ["Alice lives in Berlin", "Alice moved to Berlin", "quarterly revenue grew strongly"]).vectors)
    assert a @ b > a @ c + 0.2


def test_an_empty_text_gets_a_zero_vector_and_an_empty_batch_nothing():
    assert not any(HashingEmbedder(16).embed([""]).vectors[0])
    assert HashingEmbedder(16).embed([]).vectors == []


def test_a_tiny_dimension_is_refused():
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(2)
