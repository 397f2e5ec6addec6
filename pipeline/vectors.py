"""Embedding vectors as float32 bytes: the one encoding of a vector outside memory.

- The stores keep a fact's vector as raw float32 bytes (``to_bytes`` / ``from_bytes``): a
  384-dim vector takes 1.5 KiB instead of ~8 KiB of JSON.
- A run record keeps a stage's vectors as base64 of the same bytes (``pack`` / ``unpack``):
  every later stage parses the record again, and a base64 string parses at once where a list
  of floats costs a float object each. Records stored before kept JSON lists; they read as
  they are.
- ``Float32Vector`` reads stored bytes as a list of floats without copying them per element.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np


def to_bytes(vector) -> bytes | None:
    """float32 bytes of one vector (None stays None)."""
    if vector is None:
        return None
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(blob: bytes | None) -> list[float] | None:
    """One vector's float32 bytes as a list of floats (None stays None)."""
    return None if blob is None else np.frombuffer(blob, dtype=np.float32).tolist()


def pack(vectors) -> str:
    """Vectors (rows of one dimension) as base64 float32 bytes; none pack to ``""``."""
    if not len(vectors):
        return ""
    return base64.b64encode(np.asarray(vectors, dtype=np.float32).tobytes()).decode("ascii")


def unpack(value: str | list, dim: int) -> list[list[float]]:
    """The rows ``pack`` stored; a list of lists (a record stored before) is returned as it is."""
    if isinstance(value, list):
        return value
    if not value:
        return []
    return np.frombuffer(base64.b64decode(value), dtype=np.float32).reshape(-1, dim).tolist()


def unpack_one(value: str | list[float] | None) -> list[float] | None:
    """One vector ``pack`` stored (``pack([v])``); a list (a record stored before) as it is."""
    if value is None or isinstance(value, list):
        return value
    return np.frombuffer(base64.b64decode(value), dtype=np.float32).tolist()


class Float32Vector(Sequence):
    """A read-only float32 vector that reads like a list of floats (``len``, indexing,
    iteration, truth value, ``==`` against a list) and converts to numpy without a copy per
    element (``np.asarray``). Search candidates carry these: 100k of them load in a fraction of
    the time (and memory) that lists of Python floats would take. It may be one row of a
    matrix shared by a whole batch of candidates (the row is sliced only when read)."""

    __slots__ = ("_base", "_row")

    def __init__(self, base: np.ndarray, row: int = -1) -> None:
        self._base = base
        self._row = row

    @property
    def _array(self) -> np.ndarray:
        return self._base if self._row < 0 else self._base[self._row]

    def __len__(self) -> int:
        return self._base.shape[-1]

    def __getitem__(self, index):
        return self._array[index].tolist()

    def __iter__(self):
        return iter(self._array.tolist())

    def __bool__(self) -> bool:
        return self._base.shape[-1] > 0

    def __array__(self, dtype=None, copy=None):
        array = self._array
        return array if dtype is None else array.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Float32Vector, np.ndarray, list, tuple)):
            return self._array.tolist() == np.asarray(other, dtype=np.float32).tolist()
        return NotImplemented

    __hash__ = None  # mutable-looking sequences are unhashable, like lists

    def __repr__(self) -> str:
        return f"Float32Vector({self._array.tolist()!r})"

    def __reduce__(self):
        return (Float32Vector, (self._array.copy(),))

    def tolist(self) -> list[float]:
        return self._array.tolist()

    def matrix_row(self) -> tuple[np.ndarray, int]:
        """The batch matrix this vector is a row of, and its row (-1: the vector is its own
        array), so that a reader of many candidates can gather rows without a copy each."""
        return self._base, self._row


def view(blob: bytes | None) -> Float32Vector | None:
    """A read-only float32 vector over stored bytes."""
    if blob is None:
        return None
    return Float32Vector(np.frombuffer(blob, dtype=np.float32))


def views(blobs: list[bytes | None]) -> list[Float32Vector | None]:
    """Vectors over many stored blobs at once: one matrix when they share a dimension."""
    sizes = {len(b) for b in blobs if b is not None}
    if len(sizes) != 1:
        return [view(b) for b in blobs]
    size = sizes.pop()
    present = [b for b in blobs if b is not None]
    matrix = np.frombuffer(b"".join(present), dtype=np.float32).reshape(len(present), size // 4)
    out: list[Float32Vector | None] = []
    row = 0
    for blob in blobs:
        if blob is None:
            out.append(None)
        else:
            out.append(Float32Vector(matrix, row))
            row += 1
    return out
