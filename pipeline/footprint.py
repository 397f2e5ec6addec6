"""What the store holds about one user, as its provenance queries return it (design §11
"Provenance and erasure"). Plain values: the store port fills them through indexes
(``pipeline.store.ports.provenance``), erasure, its verification and the export read them.

- ``Resting``: the facts and reflections resting on a user (their ``source_user_ids`` name
  them, or they are of the user's own scope), or the unattributed ones (no source at all).
- ``Footprint``: how many documents still name the user in an id field, per
  ``collection.field``, and the consolidation leases of their scope. Empty after an erasure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipeline.user_ids import LEASE_PREFIX, lease_names_user
from schemas.documents import Fact, Reflection


@dataclass
class Resting:
    facts: list[Fact] = field(default_factory=list)
    reflections: list[Reflection] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.facts) + len(self.reflections)


@dataclass(frozen=True)
class Footprint:
    counts: Mapping[str, int]   # "collection.field" -> documents naming the user there (> 0 only)
    leases: tuple[str, ...] = ()

    @classmethod
    def of(cls, counts: Mapping[str, int], lease_names: Iterable[str], user_id: str,
           agent_id: str | None) -> "Footprint":
        """From per-field counts and the lease names held: keeps the non-zero counts and the
        leases of the user's scope (under ``agent_id``, or any agent)."""
        prefix = f"{LEASE_PREFIX}{agent_id}:" if agent_id else LEASE_PREFIX
        leases = tuple(sorted(n for n in lease_names if lease_names_user(n, user_id) and n.startswith(prefix)))
        return cls({k: v for k, v in sorted(counts.items()) if v}, leases)

    def traces(self) -> list[str]:
        """One line per place the user is still named: ``messages.sender_id: 3``."""
        return [f"{name}: {count}" for name, count in self.counts.items()] + [f"leases: {n}" for n in self.leases]

    def __bool__(self) -> bool:
        return bool(self.counts or self.leases)
