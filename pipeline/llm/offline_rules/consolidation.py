"""consolidate by rule: merge, de-duplicate, newer wins, group into sections, trim to fit.

1. The current blob's sections are kept, by name and order (its own SOURCE note aside).
2. Each reflection, oldest first, goes to a section chosen by keywords for its scope
   (``_SECTIONS``). One equal to a line already there (normalized, or nearly the same words)
   is dropped; one about the same subject as an existing line replaces it (newer wins).
3. The oldest lines (the current blob's first, then the oldest reflections) are dropped until
   the rendered blob, VERSION line and headers included, fits the word limit with a margin.
4. A last ``[SOURCE]`` section says the blob was formed by the offline rules provider, so a
   reader of the context knows no model wrote it. It is left out only if even it cannot fit.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from pipeline.llm.offline_rules.language import repeats, same_slot, similarity
from pipeline.prompts.consolidation import SOURCE_SECTION, BlobSection, blob_words, section_name
from pipeline.text import word_count

SOURCE_NOTE = "Formed by the offline rules provider (offline-rules-v1), not by a language model."

# (section, keywords) per scope, first match wins; the last entry is the default.
_SECTIONS: dict[str, list[tuple[str, str | None]]] = {
    "agent": [
        ("PERSONA AND STYLE", r"\b(?:style|tone|persona|voice|formal|casual|emoji)"),
        ("COMMUNITY", r"\b(?:users?|members?|community|people|everyone|participants|volunteers)\b"),
        ("PROJECTS", None),
    ],
    "user": [
        ("PREFERENCES", r"\b(?:prefers?|likes?|loves?|enjoys?|hates?|always|never|please|wants?\b(?! to)|"
                        r"favou?rite|rather|asks:|call)"),
        ("GOALS", r"\b(?:goals?|plans?|learn\w*|aims?|hopes?|wants? to|trying|projects?)\b"),
        ("NOTES", None),
    ],
    "session": [
        ("PINNED", r"https?://|www\."),
        ("REQUESTS", r"\b(?:requested|needs?|asks?|wants? to|help)\b"),
        ("SESSION STATE", None),
    ],
}

# The version number is not known here; a 6-digit one keeps the count an upper bound.
_VERSION_PLACEHOLDER = 999_999


def _section_for(scope: str, text: str) -> str:
    for name, pattern in _SECTIONS.get(scope, _SECTIONS["session"]):
        if pattern is None or re.search(pattern, text, re.IGNORECASE):
            return name
    return _SECTIONS[scope][-1][0]


# "Alice requested: ...", "Alice asks: ...", "Pinned link shared by Alice: ...": the subject
# is what follows, not the shared lead-in.
_LEAD = re.compile(r"^[^:]{1,60}\b(?:requested|asks|asked|shared by [^:]+):\s*", re.IGNORECASE)


@lru_cache(maxsize=2048)
def _without_lead(text: str) -> str:
    return _LEAD.sub("", text)


def _same_subject(new: str, old: str) -> bool:
    """A newer line about what an older one says: it replaces it (newer wins)."""
    new, old = _without_lead(new), _without_lead(old)
    sim = similarity(new, old)
    if sim.value_changed and same_slot(new, old):
        return True
    return (sim.prefix >= 2 and sim.jaccard >= 0.6) or (sim.prefix >= 4 and sim.value_changed)


def _margin(limit: int) -> int:
    return max(2, limit // 20)


def consolidate(inputs: dict[str, Any]) -> dict[str, Any]:
    scope = inputs.get("scope") or "session"
    limit = int(inputs["word_limit"])
    # name -> list of (age, text); a smaller age is older
    sections: dict[str, list[tuple[int, str]]] = {}
    age = 0
    for section in inputs.get("current_sections") or ():
        name = section_name(section["name"])
        if name == SOURCE_SECTION:  # the builder leaves it out; inputs written by hand may not
            continue
        lines = sections.setdefault(name, [])
        for bullet in section["bullets"]:
            if not repeats(bullet, [t for s in sections.values() for _, t in s]):
                lines.append((age, bullet))
                age += 1
    for reflection in inputs.get("reflections") or ():
        text = " ".join(reflection.split())
        every = [t for lines in sections.values() for _, t in lines]
        if not text or repeats(text, every):
            continue
        for name, lines in sections.items():
            sections[name] = [(a, t) for a, t in lines if not _same_subject(text, t)]
        sections.setdefault(_section_for(scope, text), []).append((age, text))
        age += 1
    return {"sections": [s.model_dump() for s in _fit(sections, limit)]}


def _fit(aged: dict[str, list[tuple[int, str]]], limit: int) -> list[BlobSection]:
    """Drop the oldest lines until the blob, with the SOURCE note, fits the limit.

    Every section's lines are in ascending age, so each one's first line is its oldest."""
    source = BlobSection(name=SOURCE_SECTION, bullets=[SOURCE_NOTE])
    budget = limit - _margin(limit)
    lines = {name: list(entries) for name, entries in aged.items()}

    def render() -> list[BlobSection]:
        return [BlobSection(name=n, bullets=[t for _, t in e]) for n, e in lines.items()]

    # Counted once, then kept up to date line by line; the rendered blob is checked below.
    words = blob_words(_VERSION_PLACEHOLDER, render() + [source])
    while words > budget and any(lines.values()):
        oldest_name = min((e[0][0], n) for n, e in lines.items() if e)[1]
        words -= word_count(f"- {lines[oldest_name][0][1]}")
        lines[oldest_name] = lines[oldest_name][1:]
    result = render()
    if blob_words(_VERSION_PLACEHOLDER, result + [source]) <= budget:
        return result + [source]
    # Not even the headers and the note fit: drop empty sections, then the note.
    result = [s for s in result if s.bullets]
    if blob_words(_VERSION_PLACEHOLDER, result + [source]) <= limit:
        return result + [source]
    return result if blob_words(_VERSION_PLACEHOLDER, result) <= limit else []
