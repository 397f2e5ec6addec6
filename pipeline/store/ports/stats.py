"""The statistics port (design §11): usage records (model calls made outside any run), and
what ``get_memory_stats`` and ``memoryctl cost`` count, counted and summed by the store, so
that neither lists an agent's runs or reflections.

Part of ``pipeline.store.port.Store``. Every method is served by an index of each adapter:
runs by agent and creation time, by session and creation time, and by user; usage records by
agent and time; reflections by agent, scope and absorption.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from schemas.documents import UsageRecord


class CostRow(NamedTuple):
    """Model calls summed for one stage, day and model (``pipeline.cost`` prices them when
    recorded; a group with any unpriced call has ``usd`` None)."""

    stage: str             # the stage's name before any ``:`` ("consolidate", not "consolidate:agent")
    day: str               # YYYY-MM-DD (UTC) of the stage's end (its start, the run's creation) or of the usage record
    model: str
    kind: str
    provider: str
    price: str             # pipeline.cost: priced, offline or unpriced
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float | None
    snapshots: tuple[str, ...] = ()  # the versions the provider reported answering as (design §11)

    def by_model(self) -> dict[str, dict[str, Any]]:
        """The row as ``pipeline.cost.summary`` reads a per-model row set."""
        row = {"kind": self.kind, "provider": self.provider, "calls": self.calls,
               "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
               "usd": self.usd, "price": self.price}
        return {self.model: {**row, "snapshots": list(self.snapshots)} if self.snapshots else row}


class ReflectionCounts(NamedTuple):
    total: int
    unabsorbed: int
    last_formed_at: datetime | None


def cost_row(stage: str, day: str, model: str, rows: Sequence[Mapping[str, Any]]) -> CostRow:
    """One ``CostRow`` of several stored per-model rows of one group (``pipeline.cost.add_rows``'s
    rule: a sum with an unpriced row is unpriced)."""
    unpriced = any(r.get("usd") is None for r in rows)
    first = rows[0]
    return CostRow(
        stage=stage.split(":")[0], day=day, model=model, kind=first.get("kind") or "llm",
        provider=first.get("provider") or "", price="unpriced" if unpriced else (first.get("price") or "unpriced"),
        calls=sum(int(r.get("calls") or 0) for r in rows),
        input_tokens=sum(int(r.get("input_tokens") or 0) for r in rows),
        output_tokens=sum(int(r.get("output_tokens") or 0) for r in rows),
        usd=None if unpriced else round(sum(float(r.get("usd") or 0) for r in rows), 9),
        snapshots=snapshots_of(r.get("snapshots") or () for r in rows),
    )


def snapshots_of(lists: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """The distinct snapshot names of several rows, sorted."""
    return tuple(sorted({name for names in lists for name in names if name}))


class StatsStore(Protocol):
    """Usage records, and counts and sums over an agent's runs, usage records and reflections."""

    @abc.abstractmethod
    def record_usage(self, record: UsageRecord) -> None:
        """Keep the priced model calls of work done outside any run (idempotent on its id)."""

    @abc.abstractmethod
    def list_usage(self, agent_id: str, since: datetime | None = None) -> list[UsageRecord]:
        """An agent's usage records at or after ``since``, oldest first."""

    @abc.abstractmethod
    def cost_rows(
        self, agent_id: str, *, since: datetime | None = None, until: datetime | None = None,
        user_id: str | None = None, session_id: str | None = None,
    ) -> list[CostRow]:
        """The recorded model calls of the agent, summed per stage, day and model: those of the
        stages of its runs created in ``[since, until)`` and of its usage records (calls no
        stage holds) made in that window. ``user_id``: only runs whose users include them, and
        the usage records of those runs; ``session_id``: only that session's runs and records."""

    @abc.abstractmethod
    def reflection_counts(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, ReflectionCounts]:
        """Per scope key: its reflections, the unabsorbed ones, and the newest one's time."""


def merged(rows: Sequence[CostRow]) -> list[CostRow]:
    """Rows of one stage, day and model summed into one (stage names cut at ``:`` meet here),
    in (stage, day, model) order."""
    groups: dict[tuple[str, str, str], list[CostRow]] = {}
    for row in rows:
        groups.setdefault((row.stage.split(":")[0], row.day, row.model), []).append(row)
    return [cost_row(stage, day, model, [r.by_model()[model] for r in found])
            for (stage, day, model), found in sorted(groups.items())]
