"""Spend caps, read and announced (design §13 "Operator controls").

- Which caps apply: an agent's own caps set at run time (``CapStore``) else the settings'
  default for every agent (``MEMORY_SPEND_CAPS`` "agent"); the global caps set at run time else
  the settings' "global".
- The spend so far: the priced USD of the usage roll-ups of the current UTC day and month,
  the agent's own and every agent's (one ranged read each, ``RollupStore.rollup_rows``).
- ``check`` gives the decision (``pipeline.spend.verdict``) and announces each cap reaching 80%
  and 100% once per window: a ``cap.reached`` webhook event and an audit entry, both with
  stable ids, and neither with content.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pipeline import spend
from pipeline.store.port import AccessStore, CapStore, RollupStore, WebhookStore
from pipeline.webhooks.outbox import announce
from schemas.access import AuditEntry
from schemas.caps import GLOBAL, SpendCaps
from schemas.settings import Settings
from schemas.webhooks import WebhookEvent

log = logging.getLogger("memory.caps")


class CapsStore(Protocol):
    """The caps, the roll-ups they are read against, and where reaching one is announced."""

    caps: CapStore
    rollups: RollupStore
    webhooks: WebhookStore
    access: AccessStore


@dataclass(frozen=True)
class Spend:
    """Priced USD per window, and the calls of the window with no price (not counted)."""

    usd: dict[str, float]
    unpriced_calls: dict[str, int]


@dataclass(frozen=True)
class Status:
    agent_id: str
    agent_caps: SpendCaps
    global_caps: SpendCaps
    agent_spend: Spend
    global_spend: Spend
    states: list[spend.CapState]

    @property
    def verdict(self) -> str:
        return spend.verdict(self.states)


def caps_of(caps: CapStore, settings: Settings, agent_id: str | None) -> SpendCaps:
    """The caps that apply to the agent (``None``: the global caps)."""
    owner = GLOBAL if agent_id is None else agent_id
    default = settings.spend_caps.global_ if agent_id is None else settings.spend_caps.agent
    return caps.get_spend_caps(owner) or default


def spend_of(rollups: RollupStore, agent_id: str | None, now: datetime) -> Spend:
    """The agent's (every agent's: None) spend in the current UTC day and month."""
    today, _ = spend.window_days("day", now)
    rows = rollups.rollup_rows(agent_id, since_day=spend.window_days("month", now)[0],
                               until_day=spend.window_days("month", now)[1])
    by_window = {"month": rows, "day": [r for r in rows if r.day == today]}
    return Spend({w: sum(r.usd for r in found if r.usd is not None) for w, found in by_window.items()},
                 {w: sum(r.calls for r in found if r.usd is None) for w, found in by_window.items()})


def status(store: CapsStore, settings: Settings, agent_id: str, now: datetime) -> Status:
    """The agent's and the global caps against the spend so far (the global spend is read only
    when a global cap is set)."""
    agent_caps, global_caps = caps_of(store.caps, settings, agent_id), caps_of(store.caps, settings, None)
    agent_spend = spend_of(store.rollups, agent_id, now) if not agent_caps.empty else Spend({}, {})
    global_spend = spend_of(store.rollups, None, now) if not global_caps.empty else Spend({}, {})
    found = spend.states("agent", agent_caps, agent_spend.usd) + spend.states("global", global_caps, global_spend.usd)
    return Status(agent_id, agent_caps, global_caps, agent_spend, global_spend, found)


def check(store: CapsStore, settings: Settings, agent_id: str, now: datetime) -> Status:
    """``status``, with each cap at 80% or 100% announced once per window (``announce_levels``)."""
    found = status(store, settings, agent_id, now)
    announce_levels(store, found, now)
    return found


def announce_levels(store: CapsStore, found: Status, now: datetime) -> None:
    """A ``cap.reached`` event and an audit entry per cap at 80% or 100% of itself, once per
    (cap, window, level); a global cap is announced to the agent whose formation met it."""
    for state in found.states:
        if state.level == 0:
            continue
        levels = (80, 100) if state.level == 100 else (80,)
        for level in levels:
            _announce_once(store, found.agent_id, state, level, now)


def _announce_once(store: CapsStore, agent_id: str, state: spend.CapState, level: int, now: datetime) -> None:
    window = spend.window_name(state.window, now)
    key = f"cap:{agent_id}:{state.scope}:{state.window}:{window}:{state.kind}:{level}"
    first_day = spend.window_days(state.window, now)[0]
    since = datetime.fromisoformat(first_day).replace(tzinfo=now.tzinfo)
    if any(e.audit_id == key for e in store.access.list_audit(since=since, action="cap.reached", limit=1000)):
        return
    data = {"scope": state.scope, "window": state.window, "level": level, "kind": state.kind,
            "cap_usd": state.cap_usd, "spend_usd": round(state.spend_usd, 6), "window_start": first_day}
    announce(store.webhooks, [WebhookEvent(event_id=key, kind="cap.reached", agent_id=agent_id, occurred_at=now, data=data)],
             now)
    store.access.record_audit(AuditEntry(audit_id=key, at=now, credential_id="formation", credential_kind="system",
                                  action="cap.reached", agent_id=agent_id, subject=f"{state.scope}:{state.window}",
                                  counts={"level": level}))
    log.warning("agent %s: %s %s %s cap of %.2f USD at %d%% (%.4f USD spent in %s)", agent_id, state.scope,
                state.window, state.kind, state.cap_usd, level, state.spend_usd, window)
