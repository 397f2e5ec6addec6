"""Consolidation decisions (design §5.5): which scopes are due, and a merge that never ends over
its word limit. Pure, apart from the LLM port handed to ``merge_within_limit``.

- Due after a run: every enabled scope key whose unabsorbed count is >= its threshold.
- Due at session end: every scope key holding >= 1 unabsorbed reflection from that session,
  whatever the thresholds.
- The merged blob is ``VERSION: n`` (the stored version + 1) and its sections; an answer over
  the word limit, or one that leaves out a section of the stored blob without naming it
  outdated, is asked again with what was wrong stated, and after the bounded retries the
  consolidation fails (transient): nothing is stored and the buffer stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pipeline import tracing
from pipeline.errors import TransientError
from pipeline.llm.port import LLM, LLMRequest
from pipeline.prompts.consolidation import ConsolidationAnswer, blob_words, missing_sections, render_blob
from schemas.documents import Reflection


class OverWordLimit(TransientError):
    """Every attempt came back over the word limit; the buffer is left untouched."""


class LostSections(TransientError):
    """Every attempt left out a section of the stored blob without naming it outdated; the
    buffer is left untouched."""


def scope_of_key(key: str) -> str:
    return "agent" if key == "agent" else key.split(":", 1)[0]


def due_by_threshold(counts: Mapping[str, int], thresholds: Mapping[str, int]) -> list[str]:
    """Scope keys whose unabsorbed count reached the threshold of their scope, in given order."""
    return [key for key, n in counts.items() if n >= thresholds[scope_of_key(key)] and n > 0]


def due_at_session_end(buffers: Mapping[str, Iterable[Reflection]], session_id: str) -> list[str]:
    """Scope keys holding at least one unabsorbed reflection formed in ``session_id``."""
    return [
        key for key, items in buffers.items()
        if any(r.source_session_id == session_id and not r.absorbed for r in items)
    ]


def merge_order(keys: Iterable[str]) -> list[str]:
    """Distinct keys, agent first, then users, then sessions (stable, for stage numbering)."""
    rank = {"agent": 0, "user": 1, "session": 2}
    return sorted(dict.fromkeys(keys), key=lambda k: (rank.get(scope_of_key(k), 3), k))


@dataclass
class Merge:
    content: str
    version: int
    words: int
    attempts: int
    over_limit_answers: list[int] = field(default_factory=list)  # excess of each rejected answer
    #: per answer that left sections out unnamed, their names
    lost_section_answers: list[list[str]] = field(default_factory=list)
    #: sections the accepted answer named outdated (left out on purpose)
    outdated_sections: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"calls": 0, "input_tokens": 0, "output_tokens": 0})
    modes: dict[str, int] = field(default_factory=dict)  # calls per structured-output mode


def merge_within_limit(
    llm: LLM,
    build: Callable[[int | None, Sequence[str]], LLMRequest[ConsolidationAnswer]],
    *,
    version: int,
    word_limit: int,
    max_length_retries: int,
    current_blob: str = "",
    usage=None,
) -> Merge:
    """Ask for the merge, then again with what was wrong stated (the excess words, the sections
    of ``current_blob`` left out without being named outdated), at most
    ``1 + max_length_retries`` times. Returns the rendered blob of ``version`` within
    ``word_limit`` that keeps every section, or raises ``OverWordLimit`` / ``LostSections``
    (after the last answer's fault); LLM errors propagate unchanged (the caller retries them)."""
    merge = Merge("", version, 0, 0)
    excess: int | None = None
    missing: list[str] = []
    for _ in range(1 + max_length_retries):
        # ``usage`` (a runner.Usage) counts each call per model for the cost
        request = build(excess, missing)
        response = usage.complete(llm, request) if usage is not None else tracing.complete(llm, request)
        merge.attempts += 1
        merge.usage["calls"] += 1
        merge.usage["input_tokens"] += response.input_tokens
        merge.usage["output_tokens"] += response.output_tokens
        if response.structured_output:
            merge.modes[response.structured_output] = merge.modes.get(response.structured_output, 0) + 1
        sections = response.parsed.sections
        words = blob_words(version, sections)
        missing = missing_sections(current_blob, response.parsed)
        excess = words - word_limit if words > word_limit else None
        if excess is None and not missing:
            merge.content, merge.words = render_blob(version, sections), words
            merge.outdated_sections = list(response.parsed.outdated_sections)
            return merge
        if excess is not None:
            merge.over_limit_answers.append(excess)
        if missing:
            merge.lost_section_answers.append(missing)
    if missing:
        raise LostSections(
            f"consolidation answer left out the section(s) {missing} of the stored blob without naming them "
            f"outdated, after {merge.attempts} attempt(s); nothing stored, the buffer is kept"
        )
    raise OverWordLimit(
        f"consolidation answer stayed over the word limit of {word_limit} after {merge.attempts} "
        f"attempt(s) (excess {merge.over_limit_answers}); nothing stored, the buffer is kept"
    )


def snapshot_ids(reflections: Sequence[Reflection]) -> list[str]:
    """The ids a consolidation absorbs: exactly those read before the merge."""
    return [r.reflection_id for r in reflections if not r.absorbed]
