"""Usage roll-ups (design §11 "Observability and cost"): the model calls of every stage, summed per
agent, user, session and day as the stage records them, so that statistics, all-time cost and
spend caps read a few rows instead of an agent's runs.

A roll-up row is keyed by (agent, scope, scope id, day, stage, model). Each recorded stage
adds its per-model rows to:

- the agent's row (scope ``agent``, id ""), the row of each user of its run (``user``) and
  the row of its session (``session``);
- each under its UTC day and under ``ALL_TIME``, the running total since the first call: an
  all-time read takes one row per stage and model however long the history.

The stores add in the same write that records the stage (``complete_stage`` when it completes
the stage, ``record_usage`` when it stores a new record): a redelivered stage adds nothing, as
it records nothing. ``rebuild_rollups`` derives every row again from the runs and usage records
(``memoryctl migrate``, for a store formed before the roll-ups); it replaces, so running it
twice gives the same rows.

Part of ``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, NamedTuple, Protocol

from pipeline.store.ports.stats import CostRow

#: the day of the running all-time total; sorts after every ISO day, so a range of days never holds it
ALL_TIME = "all"
SCOPES = ("agent", "user", "session")


class RollupKey(NamedTuple):
    agent_id: str
    scope: str           # agent, user or session
    scope_id: str        # "" for the agent
    day: str             # YYYY-MM-DD (UTC), or ALL_TIME
    stage: str           # the stage's name before any ``:``
    model: str


class Increment(NamedTuple):
    """What one recorded stage adds to one roll-up row."""

    key: RollupKey
    kind: str
    provider: str
    price: str
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float           # 0 for an unpriced row: ``unpriced`` counts it instead
    unpriced: int        # 1 when the row's price is unknown: a sum with one is unpriced
    snapshots: tuple[str, ...]


def day_of(at: datetime) -> str:
    """The UTC day of ``at`` (a naive time is UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at.astimezone(timezone.utc).date().isoformat()


def increments(
    agent_id: str, session_id: str | None, user_ids: Iterable[str], stage: str, day: str,
    by_model: Mapping[str, Mapping[str, Any]],
) -> list[Increment]:
    """The increments of one recorded stage's priced per-model rows (``pipeline.cost``) made
    on ``day`` (``day_of``)."""
    owners = [("agent", "")] + [("user", u) for u in dict.fromkeys(user_ids) if u]
    if session_id:
        owners.append(("session", session_id))
    out = []
    for model, row in by_model.items():
        unpriced = row.get("usd") is None
        for scope, scope_id in owners:
            for when in (day, ALL_TIME):
                out.append(Increment(
                    key=RollupKey(agent_id, scope, scope_id, when, stage.split(":")[0], model),
                    kind=row.get("kind") or "llm", provider=row.get("provider") or "",
                    price=row.get("price") or "unpriced", calls=int(row.get("calls") or 0),
                    input_tokens=int(row.get("input_tokens") or 0), output_tokens=int(row.get("output_tokens") or 0),
                    usd=0.0 if unpriced else float(row["usd"]), unpriced=int(unpriced),
                    snapshots=tuple(sorted(set(row.get("snapshots") or ()))),
                ))
    return out


def fold(found: Iterable[Increment]) -> list[Increment]:
    """Increments of the same row summed into one (what ``rebuild_rollups`` writes)."""
    rows: dict[RollupKey, Increment] = {}
    for inc in found:
        kept = rows.get(inc.key)
        rows[inc.key] = inc if kept is None else kept._replace(
            calls=kept.calls + inc.calls, input_tokens=kept.input_tokens + inc.input_tokens,
            output_tokens=kept.output_tokens + inc.output_tokens, usd=kept.usd + inc.usd,
            unpriced=kept.unpriced + inc.unpriced, snapshots=tuple(sorted({*kept.snapshots, *inc.snapshots})))
    return list(rows.values())


class Selection(NamedTuple):
    """Which roll-up rows a ``rollup_rows`` call reads: equal fields, then a day range (``days``
    None: the all-time row)."""

    equal: dict[str, str]
    days: tuple[str, str] | None


def selection(agent_id: str | None, user_id: str | None, session_id: str | None, since_day: str | None,
              until_day: str | None, all_time: bool) -> Selection:
    """The rows of ``RollupStore.rollup_rows``' arguments: the user's, else the session's, else
    the agent's (every agent's when None); all time, else the days in ``[since_day, until_day)``."""
    scope, scope_id = (("user", user_id) if user_id is not None else
                       ("session", session_id) if session_id is not None else ("agent", ""))
    equal = {"scope": scope, "scope_id": scope_id}
    if agent_id is not None:
        equal["agent_id"] = agent_id
    if all_time:
        return Selection({**equal, "day": ALL_TIME}, None)
    return Selection(equal, (since_day or "0000-00-00", min(until_day or ALL_TIME, ALL_TIME)))


def cost_row_of(stage: str, day: str, model: str, kind: str | None, provider: str | None, price: str | None,
                calls, input_tokens, output_tokens, usd, unpriced, snapshots: Iterable[str]) -> CostRow:
    """A ``CostRow`` of summed roll-up columns (a sum with any unpriced part is unpriced)."""
    is_unpriced = int(unpriced or 0) > 0
    return CostRow(stage=stage, day=day, model=model, kind=kind or "llm", provider=provider or "",
                   price="unpriced" if is_unpriced else (price or "unpriced"), calls=int(calls or 0),
                   input_tokens=int(input_tokens or 0), output_tokens=int(output_tokens or 0),
                   usd=None if is_unpriced else round(float(usd or 0), 9),
                   snapshots=tuple(sorted({s for s in snapshots if s})))


class RollupStore(Protocol):
    """Usage summed per agent, user, session and day, as the stages record it."""

    @abc.abstractmethod
    def rollup_rows(
        self, agent_id: str | None, *, user_id: str | None = None, session_id: str | None = None,
        since_day: str | None = None, until_day: str | None = None, all_time: bool = False,
    ) -> list[CostRow]:
        """Summed per stage, day and model: the agent's rows (every agent's for None), or its
        user's or session's. ``all_time``: the running totals (one row per stage and model, day
        ``ALL_TIME``); else the daily rows of days in ``[since_day, until_day)``."""

    @abc.abstractmethod
    def rebuild_rollups(self) -> int:
        """Derive every roll-up row again from the stored runs and usage records (replacing
        what is there); the number of rows written."""
