"""The previous system's consolidated texts, cut into units that can be screened and trimmed
one by one (``migrate-v1``, design §9 and §11). Pure, standard library.

A v1 blob (``memory_user.content``, an active shard's ``content``) is free text: sections
under ``[NAME]`` headers, bullets, paragraphs. It is read as sections of lines, and each line
as units: a bullet is one unit, a paragraph one unit per sentence. Screening keeps or drops
units; ``fit`` keeps a blob within its word limit by dropping whole units, the last one of the
section with the most words first, so that every section keeps what it can and no section is
emptied while another still holds more words. What ``fit`` drops is returned, in order, so the
migration stores it as unabsorbed reflections of the same scope: the next consolidation merges
it back through the model, within the limit, and nothing the old system held is lost.

A blob that fits and loses nothing is rendered exactly as it was written.

A single item (a directive, a suggestion, a fact, a unit ``fit`` dropped, a blob's text kept
as reflections) has its own word limit (a reflection 35 words, a fact 30 by default):
``within_limit`` packs its sentences, in order, into as few items within the limit as it
can; a sentence longer than the limit on its own cannot be cut at a sentence boundary and is
refused (returned apart, so the migration counts it), never stored past the limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass
class Section:
    """A header line ("" for text before any header) and its lines, each a list of units."""

    header: str
    lines: list[list[str]] = field(default_factory=list)

    def words(self) -> int:
        return _words(self.header) + sum(_words(u) for line in self.lines for u in line)

    def render(self) -> str:
        return "\n".join(" ".join(units) for units in self.lines if units)


def _words(text: str) -> int:
    return len(text.split())


def units_of(line: str) -> list[str]:
    """A bullet whole; a paragraph cut after each sentence's end mark."""
    line = line.strip()
    if not line:
        return []
    if _BULLET.match(line):
        return [line]
    return [part for part in _SENTENCE_END.split(line) if part]


def read_sections(text: str, *, headers: bool = True) -> list[Section]:
    """``text`` as sections; with ``headers`` off every line is content (a shard's text sits
    under the shard's own header, whatever it holds)."""
    sections = [Section("")]
    for line in text.splitlines():
        if headers and _HEADER.match(line):
            sections.append(Section(line.strip()))
            continue
        units = units_of(line)
        if units:
            sections[-1].lines.append(units)
    return [s for s in sections if s.header or s.lines]


def screen(sections: list[Section], keep: Callable[[str], bool]) -> None:
    """Drop every unit ``keep`` refuses (in place); a line left empty goes."""
    for section in sections:
        section.lines = [kept for kept in ([u for u in line if keep(u)] for line in section.lines) if kept]


def render(sections: list[Section], *, version: int | None = None) -> str:
    """``VERSION: n`` (when given), then each section's header and lines, a blank line apart."""
    parts = [f"VERSION: {version}"] if version is not None else []
    for section in sections:
        body = section.render()
        parts.append("\n".join(p for p in (section.header, body) if p))
    return "\n\n".join(p for p in parts if p)


def within_limit(units: list[str], word_limit: int) -> tuple[list[str], list[str]]:
    """(items, refused): ``units`` (lines, bullets without their marks, or sentences) cut into
    sentences and packed in order
    into items of at most ``word_limit`` words; sentences over the limit alone are refused."""
    sentences = [part for unit in units for line in unit.splitlines()
                 for part in _SENTENCE_END.split(_BULLET.sub("", line).strip()) if part]
    items: list[list[str]] = []
    refused = []
    for sentence in sentences:
        words = _words(sentence)
        if words > word_limit:
            refused.append(sentence)
        elif items and sum(map(_words, items[-1])) + words <= word_limit:
            items[-1].append(sentence)
        else:
            items.append([sentence])
    return [" ".join(item) for item in items], refused


def fit(sections: list[Section], word_limit: int, *, version: int | None = None) -> list[tuple[int, str]]:
    """Drop whole units (in place) until the rendered blob is within ``word_limit`` words;
    returns what was dropped as (section index, unit), in the order it stood."""
    fixed = _words(f"VERSION: {version}") if version is not None else 0
    total = fixed + sum(s.words() for s in sections)
    dropped: list[tuple[int, str]] = []
    while total > word_limit:
        candidates = [i for i, s in enumerate(sections) if s.lines]
        if not candidates:
            break   # headers alone are over the limit: nothing whole is left to drop
        i = max(candidates, key=lambda k: (sections[k].words(), k))
        line = sections[i].lines[-1]
        unit = line.pop()
        if not line:
            sections[i].lines.pop()
        dropped.append((i, unit))
        total -= _words(unit)
    dropped.reverse()
    return sorted(dropped, key=lambda d: d[0])
