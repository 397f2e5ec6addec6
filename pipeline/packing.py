"""Fitting the memory context into a token budget (pure).

An agent's prompt has a budget, and the context must never break it. Items are taken in
priority order: the consolidated blobs (session, then user, then agent: the narrower the
scope, the more it says about this conversation), then the facts relevant to the current
message when one was given (best first), then the recent reflections (newest first), then
the facts (newest first). An item goes in whole if the context, with it, still fits;
otherwise it is left out whole, never cut mid-item, and the next one is tried. So a
lower-priority item never displaces a higher-priority one, and an item bigger than the whole
budget is left out and reported. What was left out is stated in the block itself
(``<Omitted facts="12" reflections="3"/>``), inside the budget.

Tokens are counted with ``pipeline.trigger.estimate_tokens`` (characters / 4.5), the same
provider-free estimate that paces formation: no tokenizer file is needed, and it is the
figure the budget is checked against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from pipeline.context import FactLine, Omitted, ScopeMemory, render_context
from pipeline.trigger import estimate_tokens

#: priority of the blobs by scope kind (lower first)
_BLOB_ORDER = {"session": 0, "user": 1, "agent": 2}


@dataclass(frozen=True)
class _Item:
    kind: str            # "blob", "relevant", "reflection" or "fact"
    scope_index: int     # which scope (blobs and reflections)
    index: int           # which reflection or fact


def _priority(scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], relevant: Sequence[FactLine]) -> list[_Item]:
    def kind_of(i: int) -> int:
        return _BLOB_ORDER.get(scopes[i].scope_key.split(":", 1)[0], len(_BLOB_ORDER))

    items = [_Item("blob", i, 0) for i in sorted(range(len(scopes)), key=kind_of) if scopes[i].consolidated.strip()]
    items += [_Item("relevant", -1, k) for k in range(len(relevant))]
    reflections = [
        (i, j) for i, scope in enumerate(scopes) for j, text in enumerate(scope.reflections) if text.strip()
    ]
    # reflections are listed oldest first within a scope; across scopes the narrower goes first
    reflections.sort(key=lambda ij: (-ij[1] + len(scopes[ij[0]].reflections), kind_of(ij[0])))
    items += [_Item("reflection", i, j) for i, j in reflections]
    newest_first = sorted(range(len(facts)), key=lambda k: facts[k].changed_at, reverse=True)
    items += [_Item("fact", -1, k) for k in newest_first]
    return items


def _render(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], relevant: Sequence[FactLine], now: datetime,
    kept: set[_Item], all_items: list[_Item],
) -> str:
    shown_scopes = [
        replace(
            scope,
            consolidated=scope.consolidated if _Item("blob", i, 0) in kept else "",
            reflections=[text for j, text in enumerate(scope.reflections) if _Item("reflection", i, j) in kept],
        )
        for i, scope in enumerate(scopes)
    ]
    shown_facts = [fact for k, fact in enumerate(facts) if _Item("fact", -1, k) in kept]
    shown_relevant = [fact for k, fact in enumerate(relevant) if _Item("relevant", -1, k) in kept]
    left = [item for item in all_items if item not in kept]
    omitted = Omitted(
        blobs=sum(item.kind == "blob" for item in left),
        reflections=sum(item.kind == "reflection" for item in left),
        facts=sum(item.kind == "fact" for item in left),
        relevant=sum(item.kind == "relevant" for item in left),
    )
    return render_context(shown_scopes, shown_facts, now, omitted, shown_relevant)


def pack_context(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], now: datetime, max_tokens: int,
    relevant: Sequence[FactLine] = (),
) -> str:
    """The ``<MemoryContext>`` block of at most ``max_tokens`` estimated tokens, items taken
    whole in priority order. "" when not even the note of what was left out fits.
    ``relevant``: the facts a search for the current message found, best first."""
    items = _priority(scopes, facts, relevant)
    kept: set[_Item] = set()
    for item in items:
        trial = kept | {item}
        if estimate_tokens(_render(scopes, facts, relevant, now, trial, items)) <= max_tokens:
            kept = trial
    xml = _render(scopes, facts, relevant, now, kept, items)
    return xml if estimate_tokens(xml) <= max_tokens else ""
