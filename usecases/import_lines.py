"""The lines of an import (design §13 "Direct writes and import"), cut from bytes as they
arrive: no line is held past a bound, so a file of any size streams through
(``usecases.imports`` reads each line)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

#: the longest line read (a fact with a long history fits many times over)
MAX_LINE_BYTES = 1_048_576


class TooLong(bytes):
    """A line past ``MAX_LINE_BYTES``: only its first bytes, the rest skipped to its end."""


class LineSplitter:
    """Bytes in, lines out, as they arrive: no line is held past ``max_bytes``."""

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._overflow = False

    def feed(self, chunk: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            out.append(self._take(chunk[start:end]))
            start = end + 1
        self._add(chunk[start:])
        return out

    def end(self) -> list[bytes]:
        return [self._take(b"")] if self._buffer or self._overflow else []

    def _add(self, part: bytes) -> None:
        if self._overflow:
            return
        self._buffer += part
        if len(self._buffer) > self.max_bytes:
            self._overflow = True
            del self._buffer[64:]

    def _take(self, tail: bytes) -> bytes:
        self._add(tail)
        line: bytes = TooLong(bytes(self._buffer)) if self._overflow else bytes(self._buffer)
        self._buffer.clear()
        self._overflow = False
        return line


def split_lines(chunks: Iterable[bytes], max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    splitter = LineSplitter(max_bytes)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.end()
