"""Stage outputs keep vectors as base64 float32; records stored as JSON lists still read."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.formation.stages import pack_vectors, unpack_vectors


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
