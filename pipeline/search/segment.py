"""One search segment: a scope key's live facts of one agent, indexed for both signals.

Semantic. A small segment keeps its unit vectors as a float32 matrix and scores every row
exactly. A segment of ``QUANTIZE_MIN`` rows or more keeps them as int8 codes with one scale per
row (a quarter of the memory, and a quarter of the bytes a scan reads: the scan is bound by
memory bandwidth), scans the codes with SIMD int8 dot products (``simsimd``), and rescores the
best ``max(RESCORE_FACTOR * limit, RESCORE_MIN)`` rows exactly in float32. The float32 rows
live in an anonymous temporary file (deleted by the system when the segment goes) and are read
back with ``pread``: they cost no process memory, and a query reads ~100 rows of them. Scores
are always exact float32 cosines; only which rows get rescored comes from the int8 scan, and
``bench.search`` reports the top-10 overlap with the exact scan beside the timings.

Text. A flat inverted index with query-time typo tolerance (``pipeline.search.text_index``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from pipeline.search.text_index import TextIndex

#: segments with at least this many vectors are scanned in int8 and rescored in float32;
#: smaller ones are scanned exactly (their scan takes well under a millisecond)
QUANTIZE_MIN = 4096
#: rows rescored exactly per query: max(RESCORE_FACTOR * limit, RESCORE_MIN)
RESCORE_FACTOR = 4
RESCORE_MIN = 100
#: filters whose row masks a segment keeps (``Segment.mask_for``)
MASKS_KEPT = 16


class RowFile:
    """Float32 rows of ``dim`` columns in an open binary file, read back by row index with
    ``pread``: a query reads ~100 rows and the file costs no process memory."""

    def __init__(self, file: BinaryIO, dim: int) -> None:
        self._file = file
        self._dim = dim
        self._row_bytes = dim * 4

    def rows(self, indices: np.ndarray) -> np.ndarray:
        out = np.empty((len(indices), self._dim), dtype=np.float32)
        fd, size = self._file.fileno(), self._row_bytes
        for j, i in enumerate(indices.tolist()):
            out[j] = np.frombuffer(os.pread(fd, size, i * size), dtype=np.float32)
        return out

    def close(self) -> None:
        self._file.close()


class VectorFile(RowFile):
    """Float32 rows in an anonymous temporary file, read back by row index."""

    def __init__(self, matrix: np.ndarray) -> None:
        file = tempfile.TemporaryFile(prefix="memory-segment-")
        file.write(np.ascontiguousarray(matrix, dtype=np.float32).data)
        file.flush()
        super().__init__(file, matrix.shape[1])

    def copy_to(self, path: "os.PathLike[str]") -> None:
        """Write every row, as raw float32 in row order, to ``path``."""
        self._file.seek(0)  # reads elsewhere use pread, which ignores the file position
        with open(path, "wb") as out:
            shutil.copyfileobj(self._file, out, 1 << 20)


def quantize(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes and per-row scales: ``row ≈ codes * scale`` (zero rows stay zero)."""
    peak = np.abs(matrix).max(axis=1) if matrix.size else np.zeros(matrix.shape[0], dtype=np.float32)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    codes = np.rint(matrix / safe[:, None]).astype(np.int8)
    return codes, scales


def _int8_dots(codes: np.ndarray, query_codes: np.ndarray, threads: int = 1) -> np.ndarray:
    import simsimd

    return np.asarray(simsimd.cdist(query_codes[None, :], codes, metric="dot", threads=threads))[0]


@dataclass
class Segment:
    """One scope key's live facts of one agent, indexed for both signals."""

    ids: list[str]
    formed_at: np.ndarray                      # float seconds, for stable tie-breaks (newest first)
    has_vector: np.ndarray                     # (n,) bool
    text: TextIndex
    embedding_model: str | None = None
    dim: int = 0
    #: exact segments: (n, dim) float32 unit rows, zero rows lack a vector
    matrix: np.ndarray | None = None
    #: quantized segments: (n, dim) int8 codes, (n,) scales, and the float32 rows on file
    codes: np.ndarray | None = None
    scales: np.ndarray | None = None
    vectors: VectorFile | None = None
    #: the rows each recent filter lets through (``mask_for``)
    masks: dict[tuple, np.ndarray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def quantized(self) -> bool:
        return self.codes is not None

    @property
    def nbytes(self) -> int:
        """Process memory held by the segment's arrays and indexes (Python strings estimated:
        ~60 bytes per fact id, see ``TextIndex.nbytes`` for terms)."""
        arrays = [self.formed_at, self.has_vector, self.matrix, self.codes, self.scales]
        return sum(a.nbytes for a in arrays if a is not None) + self.text.nbytes + 60 * len(self.ids)

    def close(self) -> None:
        if self.vectors is not None:
            self.vectors.close()

    def mask_for(self, having: Sequence[Sequence[str]], allowed: Callable[[], set[str]]) -> np.ndarray:
        """The rows whose fact is in ``allowed()`` (the facts a filter's label groups ``having``
        let through), computed once per filter and kept with the segment: the last
        ``MASKS_KEPT`` filters, ``size`` bytes each."""
        key = tuple(tuple(sorted(group)) for group in having)
        held = self.masks.get(key)
        if held is None:
            ids = allowed()
            held = np.fromiter((fid in ids for fid in self.ids), dtype=bool, count=self.size)
            if len(self.masks) >= MASKS_KEPT:
                self.masks.clear()  # racing searches may both compute one: never wrong, once more work
            self.masks[key] = held
        return held

    def cosines(
        self, query: np.ndarray, limit: int, threads: int = 1, mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Row indices and their exact cosine to the unit ``query``: every row with a vector
        (and in ``mask``, when given) for an exact segment, the rescored best such rows of the
        int8 scan for a quantized one (the scan split over ``threads``; the result does not
        depend on it). The mask applies before the best rows are picked: a filter never
        empties a result that other facts filled."""
        searched = self.has_vector if mask is None else self.has_vector & mask
        if self.codes is None:
            rows = np.flatnonzero(searched)
            return rows, (self.matrix @ query)[rows]
        query_scale = float(np.abs(query).max()) / 127.0
        approx = _int8_dots(self.codes, np.rint(query / query_scale).astype(np.int8), threads) * self.scales
        approx = np.where(searched, approx, -np.inf)
        wanted = min(int(searched.sum()), max(RESCORE_FACTOR * limit, RESCORE_MIN))
        if wanted <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        rows = np.argpartition(-approx, wanted - 1)[:wanted] if wanted < approx.shape[0] else np.arange(approx.shape[0])
        rows = rows[searched[rows]]
        rows.sort()
        return rows, self.vectors.rows(rows) @ query

    @classmethod
    def build(
        cls, candidates: Sequence, embedding_model: str | None, *, quantize_min: int = QUANTIZE_MIN,
    ) -> "Segment":
        ids = [c.fact_id for c in candidates]
        matrix, has_vector = _unit_matrix([c.embedding for c in candidates])
        text = TextIndex.from_contents([c.content for c in candidates])
        formed = np.fromiter((c.formed_at.timestamp() for c in candidates), dtype=np.float64, count=len(candidates))
        segment = cls(ids, formed, has_vector, text, embedding_model, dim=matrix.shape[1])
        if matrix.shape[1] and int(has_vector.sum()) >= quantize_min:
            segment.codes, segment.scales = quantize(matrix)
            segment.vectors = VectorFile(matrix)
        else:
            segment.matrix = matrix
        return segment


def _unit_matrix(vectors: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(n, dim) float32 unit rows and which rows have a vector. Rows of the store's packed
    batches (``matrix_row``) are gathered with one fancy index per batch, not per row."""
    n = len(vectors)
    present = [i for i, v in enumerate(vectors) if v is not None and len(v)]
    dim = len(vectors[present[0]]) if present else 0
    present = [i for i in present if len(vectors[i]) == dim]
    matrix = np.zeros((n, dim), dtype=np.float32)
    has_vector = np.zeros(n, dtype=bool)
    if not present:
        return matrix, has_vector
    batches: dict[int, tuple[np.ndarray, list[int], list[int]]] = {}
    loose: list[int] = []
    for i in present:
        located = getattr(vectors[i], "matrix_row", None)
        base, row = located() if located else (None, -1)
        if base is None or row < 0:
            loose.append(i)
            continue
        entry = batches.setdefault(id(base), (base, [], []))
        entry[1].append(i)
        entry[2].append(row)
    for base, targets, rows in batches.values():
        matrix[targets] = base[rows]
    if loose:
        matrix[loose] = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in loose])
    has_vector[present] = True
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix, has_vector
