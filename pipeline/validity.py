"""Which text of a fact was valid when, and what memory held at a past time (design §11
"Time"). Pure.

A fact has versions: the texts its UPDATEs replaced (``history``, oldest first) and its current
text. Each version is valid from its ``valid_from`` (the time of the message it came from)
until the next version's ``valid_from``; the current one until ``valid_to``, set when another
fact superseded it (a DELETE retires it) and open while it is live, or until its
``expires_at`` if that comes first (an expired fact is out of reads before beat stamps it). Each version was also
*recorded* at a time: the fact's ``formed_at`` for the first, the change that wrote it for the
others; that is the time <Facts> orders and ages by ("the latest change").

Facts stored before validity was kept have no ``valid_from``/``valid_to`` on their history
entries: a version is then taken as valid from when it was recorded until it was replaced (or
the fact retired).

Consolidated blobs keep no earlier versions: a context ``as_of`` a time shows a blob only if it
was last consolidated by then, and the reflections that were still buffered then (formed by
then, absorbed later or not yet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pipeline.errors import InvalidInput
from schemas.documents import ConsolidatedBlob, Fact, Reflection
from schemas.values import check_instant


@dataclass(frozen=True)
class FactVersion:
    """One text of a fact and its times."""

    fact: Fact
    content: str
    version: int
    valid_from: datetime
    valid_to: datetime | None     # None: valid until further notice
    recorded_at: datetime         # when this text was written to the store

    @property
    def current(self) -> bool:
        return self.version == self.fact.version

    def valid_at(self, when: datetime) -> bool:
        return self.valid_from <= when and (self.valid_to is None or when < self.valid_to)


def versions(fact: Fact) -> list[FactVersion]:
    """Every text the fact has had, oldest first, the current one last."""
    out: list[FactVersion] = []
    recorded = fact.formed_at
    for entry in fact.history:
        start = entry.valid_from or recorded
        end = entry.valid_to or entry.changed_at
        out.append(FactVersion(fact, entry.content, entry.version, start, max(end, start), recorded))
        recorded = entry.changed_at
    start = fact.valid_from or fact.changed_at
    end = fact.valid_to if fact.valid_to is not None else fact.retired_at
    if fact.expires_at is not None:  # valid until it expires, stamped retired or not yet
        end = fact.expires_at if end is None else min(end, fact.expires_at)
    out.append(FactVersion(fact, fact.content, fact.version, start,
                           None if end is None else max(end, start), fact.changed_at))
    return out


def expired(fact: Fact, when: datetime) -> bool:
    """Whether ``fact`` has expired by ``when``: then it is out of every read as if retired,
    whether or not beat's expiry task has stamped it yet (design §13 "Expiry")."""
    return fact.expires_at is not None and fact.expires_at <= when


def unexpired(facts: Iterable[Fact], when: datetime) -> list[Fact]:
    """``facts`` less those expired by ``when``, in their order."""
    return [f for f in facts if not expired(f, when)]


def newest_unexpired(read: Callable[[int | None], Sequence[Fact]], when: datetime, want: int | None) -> list[Fact]:
    """The first ``want`` facts of a listing (``read(n)``: its first ``n``; None: all) not
    expired by ``when``. An expired fact not yet stamped still takes a place in the store's
    answer, so the batch grows fourfold until ``want`` are found or the listing ends."""
    if want is None:
        return unexpired(read(None), when)
    limit = want
    while True:
        facts = read(limit)
        found = unexpired(facts, when)
        if len(found) >= want or len(facts) < limit:
            return found[:want]
        limit *= 4


def version_at(fact: Fact, when: datetime) -> FactVersion | None:
    """The text valid at ``when``, or None (not yet said, or superseded with nothing after it)."""
    for version in reversed(versions(fact)):
        if version.valid_at(when):
            return version
    return None


def valid_at(facts: Iterable[Fact], when: datetime) -> list[FactVersion]:
    """The versions valid at ``when`` of ``facts``, one per fact at most, most recently
    recorded first."""
    found = [v for v in (version_at(f, when) for f in facts) if v is not None]
    return sorted(found, key=lambda v: (v.recorded_at, v.fact.fact_id), reverse=True)


def newest_valid_at(read: Callable[[int], Sequence[Fact]], when: datetime, want: int) -> list[FactVersion]:
    """The ``want`` versions valid at ``when`` that were recorded last (``valid_at``'s order),
    reading facts latest change first: ``read(n)`` returns the first ``n`` (``recent_facts``).
    A version is recorded at or before its fact's latest change, so once ``want`` are found,
    recorded after the latest change of the last fact read, no fact further down can place one
    above them; until then the batch grows fourfold. What a view of one page of a past time
    reads: the facts changed since, not every fact the agent ever had."""
    if want <= 0:
        return []
    limit = want
    while True:
        facts = read(limit)
        found = valid_at(facts, when)[:want]
        if len(facts) < limit or (len(found) == want and found[-1].recorded_at > facts[-1].changed_at):
            return found
        limit *= 4


def check_as_of(as_of: object) -> datetime | None:
    """``as_of`` as given to ``search_facts`` / ``get_memory_context``: None (now) or a
    timezone-aware datetime; anything else is ``InvalidInput``."""
    if as_of is None:
        return None
    if not isinstance(as_of, datetime):
        raise InvalidInput("as_of", f"expected a datetime, got {type(as_of).__name__}")
    if as_of.tzinfo is None or as_of.utcoffset() is None:
        raise InvalidInput(
            "as_of", "needs a timezone (e.g. datetime(..., tzinfo=timezone.utc)); naive times are ambiguous")
    try:
        check_instant(as_of)  # reads subtract windows from it: year 1 would overflow there
    except ValueError as exc:
        raise InvalidInput("as_of", str(exc)) from None
    return as_of


def memory_as_of(
    blob: ConsolidatedBlob | None, reflections: Iterable[Reflection], when: datetime,
) -> tuple[str, list[Reflection]]:
    """A scope's consolidated text and buffered reflections (oldest first) as they stood at
    ``when``, as far as they can be known (see the module docstring)."""
    shown = ""
    if blob is not None and blob.last_consolidated_at is not None and blob.last_consolidated_at <= when:
        shown = blob.consolidated_content
    buffered = [
        r for r in reflections
        if r.formed_at <= when and not (r.absorbed and (r.absorbed_at is None or r.absorbed_at <= when))
    ]
    return shown, sorted(buffered, key=lambda r: r.formed_at)
