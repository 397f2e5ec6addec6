"""Fitting the memory context into a token budget, and the default budget (pure; design §6).

An agent's prompt has a budget, and the context must never break it. Items are taken in
priority order:

1. the consolidated blobs, section by section: the first ``[SECTION]`` of each blob (with the
   blob's ``VERSION`` line), then the second of each, and so on; within a round the session
   blob goes first, then the user's, then the agent's (the narrower the scope, the more it
   says about this conversation). A blob keeps its sections from the top: once a section is
   left out, so are the ones after it, so a blob that does not fit loses whole sections from
   its end, and the whole blob only when not even its first section fits;
2. the recent reflections, newest first;
3. the facts relevant to the current message when one was given, best first;
4. the recent facts, newest first.

An item goes in whole if the context, with it, still fits; otherwise it is left out whole,
never cut mid-item, and the next item of its kind is tried (a shorter one may fit). Nothing of
a lower kind goes in while an item of a higher kind is out: a fact is never kept while a
reflection is left out, a reflection never while a blob section is. So, as the budget
shrinks, the recent facts go first (oldest first), then the relevant ones (worst first), then
the reflections (oldest first), then blob sections from the ends of the blobs (the agent's
first). What was left out is stated in the block itself (``<Omitted sections="2"
facts="12"/>``), inside the budget.

Tokens are counted with ``pipeline.trigger.estimate_tokens`` (characters / 4.5), the same
provider-free estimate that paces formation: no tokenizer file is needed, and it is the
figure the budget is checked against. The default budget (``default_max_tokens``) is that
same estimate of a context rendered at the design's limits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pipeline.context import (
    MAX_RECENT_REFLECTIONS, FactLine, Omitted, ScopeMemory, render_context, render_xml, shape_context,
)
from pipeline.trigger import estimate_tokens
from schemas.context import ContextBlock
from schemas.settings import Settings

#: priority of the blobs by scope kind (lower first)
_BLOB_ORDER = {"session": 0, "user": 1, "agent": 2}
# a section header line of the blob format (design §5.5); what comes before the first one (the
# VERSION line) belongs to the first section
_HEADER = re.compile(r"^\s*\[[^\[\]]+\]\s*$")

#: Characters per word (its space included) of the text the default budget is sized for. The
#: conversations of LoCoMo dev (/work/shared/data/locomo) average 5.7; blobs and facts carry
#: more names, numbers, dates and e-mail addresses than chat does, hence the margin.
DESIGN_CHARS_PER_WORD = 6.5


def blob_sections(text: str) -> list[str]:
    """A blob cut before each ``[SECTION]`` header line, as stored (the ``VERSION`` line
    stays with the first section). A blob without headers is one section."""
    sections: list[list[str]] = []
    for line in text.strip().splitlines():
        if not sections or (_HEADER.match(line) and any(_HEADER.match(seen) for seen in sections[-1])):
            sections.append([line])
        else:
            sections[-1].append(line)
    return ["\n".join(lines) for lines in sections if "".join(lines).strip()]


@dataclass(frozen=True)
class _Item:
    kind: str            # "section", "reflection", "relevant" or "fact"
    scope_index: int     # which scope (sections and reflections)
    index: int           # which section, reflection or fact


class _Pack:
    """The items of one context in priority order, and the context a subset of them renders."""

    def __init__(self, scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], relevant: Sequence[FactLine],
                 now: datetime) -> None:
        self.scopes, self.facts, self.relevant, self.now = scopes, facts, relevant, now
        self.sections = [blob_sections(scope.consolidated) for scope in scopes]
        self.items = self._priority()

    def _kind_of(self, i: int) -> int:
        return _BLOB_ORDER.get(self.scopes[i].scope_key.split(":", 1)[0], len(_BLOB_ORDER))

    def _priority(self) -> list[_Item]:
        by_kind = sorted(range(len(self.scopes)), key=self._kind_of)
        rounds = max((len(s) for s in self.sections), default=0)
        items = [_Item("section", i, k) for k in range(rounds) for i in by_kind if k < len(self.sections[i])]
        reflections = [
            (i, j) for i, scope in enumerate(self.scopes) for j, text in enumerate(scope.reflections) if text.strip()
        ]
        # reflections are listed oldest first within a scope; across scopes the narrower goes first
        reflections.sort(key=lambda ij: (len(self.scopes[ij[0]].reflections) - ij[1], self._kind_of(ij[0])))
        items += [_Item("reflection", i, j) for i, j in reflections]
        items += [_Item("relevant", -1, k) for k in range(len(self.relevant))]
        newest_first = sorted(range(len(self.facts)), key=lambda k: self.facts[k].changed_at, reverse=True)
        items += [_Item("fact", -1, k) for k in newest_first]
        return items

    def shape(self, kept: set[_Item]) -> ContextBlock:
        shown_scopes = [
            replace(
                scope,
                consolidated="\n".join(text for k, text in enumerate(self.sections[i])
                                       if _Item("section", i, k) in kept),
                reflections=[text for j, text in enumerate(scope.reflections) if _Item("reflection", i, j) in kept],
            )
            for i, scope in enumerate(self.scopes)
        ]
        shown_facts = [fact for k, fact in enumerate(self.facts) if _Item("fact", -1, k) in kept]
        shown_relevant = [fact for k, fact in enumerate(self.relevant) if _Item("relevant", -1, k) in kept]
        return shape_context(shown_scopes, shown_facts, self.now, self._omitted(kept), shown_relevant)

    def within(self, kept: set[_Item], max_tokens: int) -> ContextBlock | None:
        """The context of ``kept`` if, as the agent reads it (XML), it is within the budget."""
        block = self.shape(kept)
        return block if estimate_tokens(render_xml(block)) <= max_tokens else None

    def _omitted(self, kept: set[_Item]) -> Omitted:
        left = [item for item in self.items if item not in kept]
        whole = {i for i, s in enumerate(self.sections) if s and not any(_Item("section", i, k) in kept
                                                                        for k in range(len(s)))}
        return Omitted(
            blobs=len(whole),
            sections=sum(item.kind == "section" and item.scope_index not in whole for item in left),
            reflections=sum(item.kind == "reflection" for item in left),
            facts=sum(item.kind == "fact" for item in left),
            relevant=sum(item.kind == "relevant" for item in left),
        )


def pack(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], now: datetime, max_tokens: int,
    relevant: Sequence[FactLine] = (),
) -> ContextBlock:
    """The memory context of at most ``max_tokens`` estimated tokens (as XML), items taken
    whole in priority order (see the module docstring). Empty when not even the note of what
    was left out fits. ``relevant``: the facts a search for the current message found, best
    first."""
    pack = _Pack(scopes, facts, relevant, now)
    whole = pack.within(set(pack.items), max_tokens)
    if whole is not None:
        return whole
    kept: set[_Item] = set()
    block = pack.within(kept, max_tokens)  # None: not even the note of what was left out fits
    short: str | None = None  # the first kind an item of which was left out
    for item in pack.items:
        if short is not None and item.kind != short:
            break  # nothing of a lower kind goes in while something of a higher kind is out
        if item.kind == "section" and item.index and _Item("section", item.scope_index, item.index - 1) not in kept:
            continue  # a blob keeps its sections from the top
        trial = kept | {item}
        fitting = pack.within(trial, max_tokens)
        if fitting is not None:
            kept, block = trial, fitting
        else:
            short = item.kind
    return block if block is not None else ContextBlock()


def pack_context(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], now: datetime, max_tokens: int,
    relevant: Sequence[FactLine] = (),
) -> str:
    """``pack`` written as the ``<MemoryContext>`` XML ("" when nothing fits)."""
    return render_xml(pack(scopes, facts, now, max_tokens, relevant))


# ------------------------------------------------------------------------ default budget ----
def _words(count: int) -> str:
    """``count`` words of 5 and 6 letters in turn: ``DESIGN_CHARS_PER_WORD`` with their spaces."""
    return " ".join("x" * (5 + i % 2) for i in range(count))


def _design_blob(word_limit: int) -> str:
    """A blob of ``word_limit`` words as consolidation counts them (the VERSION line, the
    header and the bullet marks included), in the blob format, bullets of ten words."""
    lines, left = ["VERSION: 1", "[DESIGN]"], word_limit - 3
    while left > 0:
        take = min(10, left)
        lines.append("- " + _words(take - 1) if take > 1 else _words(1))
        left -= take
    return "\n".join(lines)


def default_max_tokens(settings: Settings) -> int:
    """The budget a context at the design's limits needs (design §6): every consolidated
    blob at its word limit, each scope's buffer of recent reflections up to its consolidation
    threshold (at most ``MAX_RECENT_REFLECTIONS``) at the reflection word limit, and a page of
    facts (the FIFO limit) at the fact word limit, in words ``DESIGN_CHARS_PER_WORD`` long.
    Counted with the packer's own estimate on the packer's own rendering, so a context
    within those limits is never cut by the default, whatever the limits are set to."""
    scopes = []
    for scope, key in (("agent", "agent"), ("user", "user:u"), ("session", "session:s")):
        buffered = min(settings.consolidation_threshold(scope), MAX_RECENT_REFLECTIONS)  # type: ignore[arg-type]
        scopes.append(ScopeMemory(key, _design_blob(settings.word_limit(scope)),  # type: ignore[arg-type]
                                  [_words(settings.reflection_word_limit)] * buffered))
    now = datetime(2026, 1, 1)
    aged = now - timedelta(days=max(1, settings.facts_fifo_max_age_days))  # the widest age shown
    facts = [FactLine("agent", _words(settings.fact_word_limit), aged)] * settings.facts_fifo_limit
    return math.ceil(estimate_tokens(render_context(scopes, facts, now)))
