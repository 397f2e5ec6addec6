"""Search segments as memory-mapped files, shared by the worker processes of one machine.

Each process used to build and hold its own copy of every segment (~60 MB per 100k facts), so
N worker processes held N copies. With a segment directory (``MEMORY_SEARCH_SEGMENT_DIR``)
a segment is written once, as a directory of flat arrays (int8 codes and scales, the float32
rows the rescore reads, the text index's postings, the fact ids), and every process maps the
same files (the float32 rows are read with ``pread``, a hundred per query; the text index's
terms are searched in place, ``TermTable``): the page cache holds one copy.

- Versions: a segment's directory is named by a digest of (agent, scope key, model) and the
  scope's stamp token, so a formation, a retirement or an erasure (which move the stamps)
  leads to a new directory; the older ones are removed once it is in place (a process that
  still maps one keeps reading it until it lets it go: unlinked files live while mapped), a
  newer one is left alone. A new version of the agent's own scope also removes every version
  of the agent's scopes made before the agent's stamp moved, among them the scope of a user
  an erasure emptied, which no search asks for again.
- One builder: a process that finds no directory for the token takes an exclusive
  ``flock`` on the segment's lock file, looks again, and only then builds; the others wait
  on the lock and map what it wrote. A directory appears whole or not at all: it is written
  under a temporary name and renamed.
- A directory left by another store (a database recreated at the same path starts its stamps
  again) is told apart by its content: its size must be the scope's live fact count and its
  first and last fact ids must be live facts of that scope; otherwise it is rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pipeline.search.segment import RowFile, Segment
from pipeline.search.text_index import TermTable, TextIndex

#: 3: text terms fold accents (``scoring.fold_accents``); files of an older format are rebuilt
FORMAT = 3
_TEXT = ("offsets", "rows", "tfs", "doc_len")


class IdTable:
    """Fact ids stored as one UTF-8 blob and its offsets; an id is decoded when it is read."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = offsets

    @staticmethod
    def pack(ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encoded = [i.encode("utf-8") for i in ids]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> str:
        return bytes(self._blob[self._offsets[i]:self._offsets[i + 1]]).decode("utf-8")


class FileRows(RowFile):
    """The float32 rows a quantized segment rescores, read from its file with ``pread``: a
    query reads ~100 rows, which the page cache holds once for every process (a mapping would
    fault whole neighbourhoods of rows into each process's resident set)."""

    def __init__(self, path: Path, dim: int) -> None:
        # closed with the segment, or when it is collected
        super().__init__(open(path, "rb"), dim)


class SegmentFiles:
    """The segment directory of one machine: build once, map everywhere."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _agent(agent_id: str) -> str:
        return hashlib.sha256(agent_id.encode()).hexdigest()[:16]

    @classmethod
    def _name(cls, agent_id: str, key: str, model: str | None) -> str:
        """``<agent digest>-<a|s><scope digest>``: the agent's scope (a) or another (s)."""
        scope = hashlib.sha256(f"{key}\0{model or ''}".encode()).hexdigest()[:24]
        return f"{cls._agent(agent_id)}-{'a' if key == 'agent' else 's'}{scope}"

    def path(self, agent_id: str, key: str, model: str | None, token: tuple[int, int]) -> Path:
        return self.directory / f"{self._name(agent_id, key, model)}-{token[0]}-{token[1]}"

    def load_or_build(
        self, agent_id: str, key: str, model: str | None, token: tuple[int, int],
        build: Callable[[], Segment], valid: Callable[[Segment], bool],
    ) -> Segment:
        """The mapped segment of ``token``: read from its directory when one is there and
        ``valid``, else built by ``build`` in this process alone (the others wait), written,
        and mapped."""
        final = self.path(agent_id, key, model, token)
        found = self._open_valid(final, valid)
        if found is not None:
            return found
        name = self._name(agent_id, key, model)
        with self._locked(name):
            found = self._open_valid(final, valid)
            if found is not None:
                return found
            for left in self.directory.glob(f"{name}-*.tmp-*"):  # a writer that died: we hold the lock
                shutil.rmtree(left, ignore_errors=True)
            built = build()
            try:
                self._write(built, final)
            finally:
                built.close()
            self._remove_older(name, token)
            if key == "agent":
                self._remove_before(agent_id, token[0])
        return load(final)

    def _open_valid(self, path: Path, valid: Callable[[Segment], bool]) -> Segment | None:
        try:
            written_as = json.loads((path / "meta.json").read_text()).get("format")
            segment = load(path) if written_as == FORMAT else None
        except FileNotFoundError:  # not written yet, or an older version being removed
            return None
        if segment is None:  # written by an older release: rebuilt under the lock
            shutil.rmtree(path, ignore_errors=True)
            return None
        if valid(segment):
            return segment
        segment.close()
        shutil.rmtree(path, ignore_errors=True)  # another store's: rebuilt under the lock
        return None

    @contextmanager
    def _locked(self, name: str):
        with open(self.directory / f"{name}.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write(self, segment: Segment, final: Path) -> None:
        temporary = final.with_name(f"{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        temporary.mkdir()
        try:
            save(segment, temporary)
            if final.exists():  # an invalid one was removed; a racing writer cannot exist (lock)
                shutil.rmtree(final)
            os.rename(temporary, final)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise

    def _versions(self, pattern: str):
        """(directory, its scope name, token) of every written version matching ``pattern``."""
        for other in self.directory.glob(pattern):
            parts = other.name.rsplit("-", 2)
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() and other.is_dir():
                yield other, parts[0], (int(parts[1]), int(parts[2]))  # not a lock, not a temporary

    def _remove_older(self, name: str, token: tuple[int, int]) -> None:
        """Versions before ``token``: ordered by the agent's stamp, then the scope's own (an
        erasure drops a user's stamp but moves the agent's). A newer one, written by a process
        that read the stamps later, stays."""
        for other, _, held in self._versions(f"{name}-*"):
            if (held[1], held[0]) < (token[1], token[0]):
                shutil.rmtree(other, ignore_errors=True)

    def drop_agent(self, agent_id: str) -> int:
        """Remove every written version of ``agent_id``'s segments; how many went. An erasure
        calls it: the files hold the erased facts' text and vectors, and would otherwise stay on
        disk until the agent's next search. A process that still maps one keeps reading it until
        it lets it go; its stamps have moved, so its next search rebuilds from the store."""
        versions = list(self._versions(f"{self._agent(agent_id)}-*"))
        for other, _, _ in versions:
            shutil.rmtree(other, ignore_errors=True)
        return len(versions)

    def _remove_before(self, agent_id: str, agent_stamp: int) -> None:
        """Every version of the agent's scopes made before its stamp reached ``agent_stamp``.
        They can no longer serve (a scope's token carries the agent's stamp), and a user scope
        that an erasure emptied is never searched again, so this is where its files go: the
        next search of the agent after the erasure."""
        for other, name, held in self._versions(f"{self._agent(agent_id)}-*"):
            stamp = held[0] if name.split("-", 1)[1].startswith("a") else held[1]
            if stamp < agent_stamp:
                shutil.rmtree(other, ignore_errors=True)


def save(segment: Segment, folder: Path) -> None:
    """Every array of ``segment`` as ``.npy`` files in ``folder``, and its ``meta.json``."""
    ids = [segment.ids[i] for i in range(segment.size)]
    blob, offsets = IdTable.pack(ids)
    arrays = {"id_blob": blob, "id_offsets": offsets, "formed_at": segment.formed_at, "has_vector": segment.has_vector}
    term_keys, term_numbers, overflow = TermTable.pack(dict(segment.text.terms))
    arrays |= {"term_keys": term_keys, "term_numbers": term_numbers}
    arrays |= {f"text_{name}": getattr(segment.text, name) for name in _TEXT}
    if segment.quantized:
        arrays |= {"codes": segment.codes, "scales": segment.scales}
        segment.vectors.copy_to(folder / "rows.f32")
    else:
        arrays["matrix"] = segment.matrix
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
    meta = {"format": FORMAT, "embedding_model": segment.embedding_model, "dim": segment.dim,
            "size": segment.size, "quantized": segment.quantized, "alphabet": segment.text.alphabet,
            "long_terms": overflow}
    (folder / "meta.json").write_text(json.dumps(meta))


def load(folder: Path) -> Segment:
    """The segment in ``folder``, its arrays mapped read-only (shared through the page cache)."""
    meta = json.loads((folder / "meta.json").read_text())

    def mapped(name: str) -> np.ndarray:
        path = folder / f"{name}.npy"
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError:  # an empty array cannot be mapped (nothing to share either)
            return np.load(path, allow_pickle=False)

    terms = TermTable(mapped("term_keys"), mapped("term_numbers"), meta["long_terms"])
    text = TextIndex.from_arrays(terms, *(mapped(f"text_{name}") for name in _TEXT), alphabet=meta["alphabet"])
    segment = Segment(
        IdTable(mapped("id_blob"), mapped("id_offsets")), mapped("formed_at"), mapped("has_vector"), text,
        meta["embedding_model"], dim=meta["dim"],
    )
    if meta["quantized"]:
        segment.codes, segment.scales = mapped("codes"), mapped("scales")
        segment.vectors = FileRows(folder / "rows.f32", meta["dim"])
    else:
        segment.matrix = mapped("matrix")
    return segment
