"""Which extracted facts a run keeps (design §1, §5.1). Pure.

- A fact over the word limit is dropped and counted, never cut.
- A user-scoped fact in a group chat (or with user memory off) is dropped and counted, never
  re-scoped to the agent.
- Empty texts and repeats inside one answer (same scope, same normalized-text hash) go too.
- A deadline (``expires_at``: a date is the end of that day, UTC) that does not read as a
  time in the accepted span is dropped and counted; the fact is kept without it.
- A category not in the agent's list (design §13 "Categories and metadata") is dropped and
  counted; the fact is kept with the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta, timezone

from pipeline.formation.scopes import ScopePlan
from pipeline.owner.categories import known
from pipeline.prompts.facts import ExtractedFact
from pipeline.text import text_hash, word_count
from schemas.values import check_instant


@dataclass(frozen=True)
class NewFact:
    """A fact this run formed, before dedup: ``index`` is stable across reruns."""

    index: int
    text: str
    scope: str
    scope_key: str
    hash: str
    expires_at: datetime | None = None   # a deadline said with it (design §13 "Expiry")
    categories: tuple[str, ...] = ()     # from the agent's list (design §13 "Categories and metadata")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> NewFact:
        expires = data.get("expires_at")
        return cls(**{k: data[k] for k in ("index", "text", "scope", "scope_key", "hash")},
                   expires_at=datetime.fromisoformat(expires) if isinstance(expires, str) else expires,
                   categories=tuple(data.get("categories") or ()))


@dataclass
class FactFilter:
    kept: list[NewFact] = field(default_factory=list)
    over_limit: int = 0
    scope_not_allowed: int = 0   # user facts in a group chat or with user memory off, ...
    repeated: int = 0
    empty: int = 0
    expiry_invalid: int = 0      # kept without the deadline it came with, which did not parse
    category_unknown: int = 0    # category names not in the agent's list, dropped from their facts

    def counts(self) -> dict[str, int]:
        return {
            "kept": len(self.kept), "over_limit": self.over_limit,
            "scope_not_allowed": self.scope_not_allowed, "repeated": self.repeated,
            "empty": self.empty, "expiry_invalid": self.expiry_invalid, "category_unknown": self.category_unknown,
        }


def filter_facts(extracted: Iterable[ExtractedFact], plan: ScopePlan, word_limit: int,
                 categories: Sequence[str] = ()) -> FactFilter:
    """Keep the facts this run may form, in answer order, numbered from 0, each with the
    names of ``categories`` (the agent's list) its answer gave."""
    result = FactFilter()
    seen: set[tuple[str, str]] = set()
    for fact in extracted:
        text = " ".join(fact.text.split())
        if not text:
            result.empty += 1
            continue
        if fact.scope not in plan.fact_scopes:
            result.scope_not_allowed += 1
            continue
        if word_count(text) > word_limit:
            result.over_limit += 1
            continue
        digest = text_hash(text)
        if (fact.scope, digest) in seen:
            result.repeated += 1
            continue
        seen.add((fact.scope, digest))
        expires = parse_expiry(fact.expires_at)
        if fact.expires_at and expires is None:
            result.expiry_invalid += 1
        said = getattr(fact, "categories", ())   # a ``FiledFact`` when the agent has categories
        filed = known(said, categories)
        result.category_unknown += len(set(said)) - len(filed)
        result.kept.append(NewFact(len(result.kept), text, fact.scope, plan.key(fact.scope), digest, expires,
                                   tuple(filed)))
    return result


def parse_expiry(value: str | None) -> datetime | None:
    """A deadline as an answer gives it: ``YYYY-MM-DD`` is the end of that day (the next
    midnight, UTC), an ISO 8601 date-time is that time (without a timezone: UTC); None for
    nothing, or for anything else or outside the accepted span."""
    text = (value or "").strip()
    if not text:
        return None
    try:
        if len(text) == 10:
            when = datetime.combine(date.fromisoformat(text), time(), timezone.utc) + timedelta(days=1)
        else:
            when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        return check_instant(when)
    except (ValueError, OverflowError):
        return None
