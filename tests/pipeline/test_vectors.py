"""One float32 encoding of vectors: stage outputs keep them as base64 of the bytes the stores keep;
records stored as JSON lists still read."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.vectors import from_bytes, to_bytes, unpack_one, view
from pipeline.vectors import pack as pack_vectors
from pipeline.vectors import unpack as unpack_vectors


@pytest.mark.parametrize("vectors", [
    [[0.5, -0.25, 0.125]],
    [[1.0, 0.0, -1.0], [0.1, 0.2, 0.3]],
])
def test_packed_vectors_read_back_as_float32_lists(vectors):
    packed = pack_vectors(vectors)
    assert isinstance(packed, str)
    assert unpack_vectors(packed, 3) == np.asarray(vectors, dtype=np.float32).tolist()


def test_vectors_stored_as_json_lists_are_read_as_they_are():
    assert unpack_vectors([[0.1, 0.2]], 2) == [[0.1, 0.2]]


def test_no_vectors_pack_to_nothing_and_read_as_none():
    assert pack_vectors([]) == ""
    assert unpack_vectors("", 384) == [] and unpack_vectors([], 384) == []


def test_a_run_record_and_a_store_read_back_the_same_float32_vector():
    vector = [0.1, -0.7, 3.3]
    stored = to_bytes(vector)
    assert unpack_vectors(pack_vectors([vector]), 3) == [from_bytes(stored)] == [view(stored).tolist()]
    assert unpack_one(pack_vectors([vector])) == from_bytes(stored) != vector  # float32, not the float64 given
    assert to_bytes(None) is None and from_bytes(None) is None and view(None) is None
