"""consolidate: prompt builder and answer model (design §5.5). The pipeline renders the blob
(``VERSION: n`` then ``[SECTION]`` and ``- `` bullets) from the structured sections."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from pipeline.errors import InvalidInput
from pipeline.llm.port import LLMRequest
from pipeline.prompts.guidance import NONE, Guidance, owner_block
from pipeline.text import word_count


class BlobSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Section name, e.g. PREFERENCES; kept across consolidations.")
    bullets: list[str]


class ConsolidationAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sections: list[BlobSection]
    outdated_sections: list[str] = Field(
        default_factory=list,
        description="Names of existing sections left out because every line in them is outdated; [] if none.",
    )


# --- the blob format --------------------------------------------------------------------------

_VERSION = re.compile(r"^\s*VERSION:\s*(\d+)\s*$")
_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*$")
_BULLET = re.compile(r"^\s*[-*•]\s*(.*)$")
UNTITLED = "NOTES"   # where parse_blob puts lines found before any section header
# A provider's note on who wrote the blob (the offline rules add one). It is not memory: the
# consolidation prompt leaves it out, so it always speaks of the latest writer only.
SOURCE_SECTION = "SOURCE"


def _clean(text: str) -> str:
    return " ".join(text.split())


def section_name(name: str) -> str:
    """A section name as the blob writes it: one line, no brackets, upper case."""
    return _clean(name.replace("[", " ").replace("]", " ")).upper()


def render_blob(version: int, sections: Sequence[BlobSection]) -> str:
    """The stored blob: ``VERSION: n``, then ``[NAME]`` and its ``- `` bullets per section.

    Names and bullets are put on one line each; empty bullets are skipped; an empty section
    keeps its header (sections are kept across consolidations).
    """
    lines = [f"VERSION: {version}"]
    for section in sections:
        lines.append(f"[{section_name(section.name) or UNTITLED}]")
        lines.extend(f"- {_clean(b)}" for b in section.bullets if _clean(b))
    return "\n".join(lines)


def parse_blob(text: str) -> tuple[int, list[BlobSection]]:
    """``(version, sections)`` of a stored blob; the inverse of ``render_blob``.

    Lenient with blobs that were not written by ``render_blob`` (migrated, or hand-edited):
    no version line reads as version 0, text before any header goes to a ``NOTES`` section,
    and a non-bullet line is read as a bullet of its section. Repeated headers are merged.
    """
    version = 0
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _VERSION.match(line)
        if match and current is None:
            version = int(match.group(1))
            continue
        header = _HEADER.match(line)
        if header and section_name(header.group(1)):
            current = section_name(header.group(1))
            sections.setdefault(current, [])
            continue
        bullet = _BULLET.match(line)
        content = _clean(bullet.group(1) if bullet else line)
        if not content:
            continue
        if current is None:
            current = UNTITLED
            sections.setdefault(current, [])
        sections[current].append(content)
    return version, [BlobSection(name=name, bullets=bullets) for name, bullets in sections.items()]


def blob_memory(text: str) -> str:
    """A stored blob as a model is shown it: in the blob format, without its ``SOURCE`` note;
    "" when it holds no section."""
    version, parsed = parse_blob(text or "")
    sections = [s for s in parsed if s.name != SOURCE_SECTION]
    return render_blob(version, sections) if sections else ""


def missing_sections(current_blob: str, answer: ConsolidationAnswer) -> list[str]:
    """Sections of the stored blob (its ``SOURCE`` note aside) that ``answer`` neither keeps
    nor names as outdated: a merge must not lose a section because a model forgot it."""
    _, current = parse_blob(current_blob or "")
    kept = {section_name(s.name) for s in answer.sections}
    kept |= {section_name(name) for name in answer.outdated_sections}
    return [s.name for s in current if s.name != SOURCE_SECTION and s.name not in kept]


def blob_words(version: int, sections: Sequence[BlobSection]) -> int:
    """The words of the rendered blob, the VERSION line and headers included."""
    return word_count(render_blob(version, sections))


# --- prompt builder ---------------------------------------------------------------------------

OPERATION = "consolidate"

_SCOPE_WORDS = {
    "agent": "the agent itself, shared by all its conversations and users",
    "user": "one user, across all their sessions with this agent",
    "session": "one conversation",
}

_SUGGESTED = {
    "agent": "PROJECTS, COMMUNITY, WORLD, PERSONA AND STYLE",
    "user": "PREFERENCES, SKILLS AND INTERESTS, GOALS, PERSONAL PROJECTS",
    "session": "GOALS, PINNED, INSTRUCTIONS, SESSION STATE",
}

_SYSTEM = """\
You consolidate the memory blob of a chat agent: one compact document, per scope, that is
always placed in the agent's context. This blob is about {about}.

Merge the CURRENT BLOB with the NEW REFLECTIONS (listed oldest first) into one updated blob:
- newer information wins: when a new reflection changes or contradicts a line, keep only the
  new version; drop what is outdated or no longer true;
- merge duplicates and near-duplicates into one line; keep each line short and specific;
- invent nothing: every line must come from the current blob or the new reflections;
- keep every existing section, by its exact name, even when it has few lines; add a new
  section only when nothing existing fits (suggested names: {suggested}); leave an existing
  section out only when every line in it is outdated, and then name it in outdated_sections;
- the whole blob must stay within {word_limit} words, counting section headers and the
  VERSION line: when space is short, drop the least useful and oldest lines first.
Answer with the sections only (name and bullet lines, without the leading "- "); the VERSION
line is written for you.
"""


def build_consolidation_request(
    scope: str,
    current_blob: str,
    reflections: Sequence[str],
    *,
    word_limit: int,
    model: str,
    excess_words: int | None = None,
    missing_sections: Sequence[str] = (),
    guidance: Guidance = NONE,
    edited_by_owner: bool = False,
) -> LLMRequest[ConsolidationAnswer]:
    """The ``consolidate`` call for one scope key (design §5.5).

    ``current_blob`` is the stored blob text ("" for none), ``reflections`` the buffered ones,
    oldest first. ``word_limit`` counts the rendered blob (``blob_words``). On a retry after
    an over-long answer, ``excess_words`` is how many words that answer had too many; after
    an answer that left existing sections out without naming them outdated,
    ``missing_sections`` names them. The prompt states both.

    The blob is shown in its rendered form, without its ``SOURCE`` note (see
    ``SOURCE_SECTION``); a blob that was not written by ``render_blob`` is shown as
    ``parse_blob`` reads it.

    ``guidance``: the owner's Memory Instructions for consolidation of this scope type.
    ``edited_by_owner``: the current blob is a version a person wrote (design §13); the prompt
    asks to keep its lines unless a new reflection contradicts them.

    ``inputs``: ``scope``, ``current_blob`` (as given), ``current_version``,
    ``current_sections`` (``[{"name", "bullets"}]`` from ``parse_blob``, without ``SOURCE``),
    ``reflections``, ``word_limit``, ``excess_words``, ``missing_sections``.
    """
    _check(scope, word_limit, excess_words)
    version, parsed = parse_blob(current_blob or "")
    sections = [s for s in parsed if s.name != SOURCE_SECTION]
    shown = blob_memory(current_blob)
    listed = "\n".join(f"{i}. {_clean(r)}" for i, r in enumerate(reflections, 1)) or "(none)"
    prompt = (
        f"CURRENT BLOB:\n{shown or '(empty: this is the first consolidation)'}\n\n"
        f"NEW REFLECTIONS (oldest first):\n{listed}\n\n"
        f"Return the consolidated sections, at most {word_limit} words in all."
    ) + _asked_again(word_limit, excess_words, missing_sections, edited_by_owner)
    return LLMRequest(
        operation=OPERATION,
        model=model,
        system=_SYSTEM.format(about=_SCOPE_WORDS[scope], suggested=_SUGGESTED[scope], word_limit=word_limit)
        + owner_block(guidance.text),
        prompt=prompt,
        response_model=ConsolidationAnswer,
        inputs={
            "scope": scope,
            "current_blob": current_blob or "",
            "current_version": version,
            "current_sections": [s.model_dump() for s in sections],
            "reflections": list(reflections),
            "word_limit": word_limit,
            "excess_words": excess_words,
            "missing_sections": list(missing_sections),
        },
    )


def _check(scope: str, word_limit: int, excess_words: int | None) -> None:
    if scope not in _SCOPE_WORDS:
        raise InvalidInput("scope", f"unknown scope {scope!r}; expected agent, user or session")
    if word_limit < 1:
        raise InvalidInput("word_limit", f"must be positive, got {word_limit}")
    if excess_words is not None and excess_words < 1:
        raise InvalidInput("excess_words", f"must be positive when given, got {excess_words}")


def _asked_again(word_limit: int, excess_words: int | None, missing_sections: Sequence[str],
                 edited_by_owner: bool) -> str:
    """What the prompt adds for an owner-written blob, and on a retry after an over-long answer
    or one that left sections out."""
    notes = ""
    if edited_by_owner:
        notes += (
            "\n\nThe CURRENT BLOB was written by the agent's owner, not by a consolidation: keep each of its "
            "lines as written unless a NEW REFLECTION contradicts or updates it."
        )
    if excess_words:
        notes += (
            f"\n\nYour previous answer was {excess_words} word(s) over the limit of {word_limit}. "
            f"Shorten it by at least {excess_words} words: merge lines and drop the least useful ones."
        )
    if missing_sections:
        names = ", ".join(f"[{name}]" for name in missing_sections)
        notes += (
            f"\n\nYour previous answer left out the existing section(s) {names}. Keep each of them, or, "
            f"if every line in it is outdated, name it in outdated_sections."
        )
    return notes
