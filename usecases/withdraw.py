"""A user withdraws their part of a shared item (design §13 "Owner controls"): a live fact or a
pending reflection that rests on their messages and on other people's keeps its text for the
others, without the user (the rule: ``pipeline.withdrawal``). The scope's version stamp moves,
so cached contexts and search caches built over the old provenance go stale. A fact's change is
announced to webhooks as ``fact.updated`` (``source`` user, ``reason`` withdrawn: its text and
version stay, its sources and history change); a pending reflection's, like every change to a
buffer, is announced by the merge that takes it into the blob.

Identity is the caller's to give: the doors pass the user their credential names, never one a
request chooses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from pipeline import withdrawal
from pipeline.store.port import IngestStore, LeaseStore, ProvenanceStore, RunStore, WebhookStore
from pipeline.validity import expired
from pipeline.webhooks import outbox
from pipeline.withdrawal import WithdrawRefused
from schemas.documents import Fact, Reflection, StoredMessage

Kind = Literal["fact", "reflection"]
#: plans made again when the item changed between reading and writing it
ATTEMPTS = 3

__all__ = ["Kind", "NotWithdrawable", "WithdrawIn", "WithdrawOut", "WithdrawRefused", "WithdrawStore",
           "refusal", "shared_with_others", "withdraw"]


class WithdrawStore(Protocol):
    """What a withdrawal reads and writes: what rests on the user, the runs and messages that
    wrote the item's texts, the item itself, the scope's version stamp and the webhook outbox."""

    provenance: ProvenanceStore
    ingest: IngestStore
    runs: RunStore
    leases: LeaseStore
    webhooks: WebhookStore


class NotWithdrawable(LookupError):
    """No such live fact or pending reflection resting on the user (``where``: the item id)."""


@dataclass(frozen=True)
class WithdrawIn:
    agent_id: str
    user_id: str       # from the caller's credential
    kind: Kind
    item_id: str
    now: datetime


@dataclass(frozen=True)
class WithdrawOut:
    kind: Kind
    item_id: str
    messages_out: int   # of the user's messages out of the item's sources
    versions_out: int   # older texts (or a reflection's formed text) gone with them


def _live_on(items: Sequence[Fact | Reflection], user_id: str, now: datetime) -> list[Fact | Reflection]:
    """Of ``items``, the live facts and pending reflections whose sources name the user."""
    return [i for i in items if user_id in i.source_user_ids
            and (not i.absorbed if isinstance(i, Reflection) else i.retired_at is None and not expired(i, now))]


def shared_with_others(items: Sequence[Fact | Reflection], user_id: str, now: datetime) -> list[Fact | Reflection]:
    """Of ``items`` resting on the user, the live facts and pending reflections that rest on
    someone else too: those the user may withdraw from (some are then refused by the rule)."""
    return [i for i in _live_on(items, user_id, now) if set(i.source_user_ids) - {user_id}]


def _candidate(store: WithdrawStore, w: WithdrawIn) -> Fact | Reflection | None:
    resting = store.provenance.resting_on(w.user_id, w.agent_id)
    pool = resting.facts if w.kind == "fact" else resting.reflections
    found = [i for i in pool if (i.fact_id if isinstance(i, Fact) else i.reflection_id) == w.item_id]
    return next(iter(_live_on(found, w.user_id, w.now)), None)


def _run_messages(store: WithdrawStore, item: Fact | Reflection) -> dict[str, list[StoredMessage]]:
    """run id -> its range, for the stored runs that wrote the item's texts."""
    runs = withdrawal.writers(item) if isinstance(item, Fact) else [item.source_run_id]
    out: dict[str, list[StoredMessage]] = {}
    for run_id in dict.fromkeys(r for r in runs if r):
        run = store.runs.get_run(run_id)
        if run is not None:
            out[run_id] = store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to)
    return out


def refusal(store: WithdrawStore, item: Fact | Reflection, user_id: str) -> str | None:
    """Why the user could not withdraw from ``item`` as it is now (None: they can), so that a
    page offers the form only where it would work and says what to do elsewhere."""
    try:
        withdrawal.plan(item, user_id, _run_messages(store, item))
    except WithdrawRefused as exc:
        return exc.reason
    return None


def withdraw(store: WithdrawStore, w: WithdrawIn) -> WithdrawOut:
    """Take ``w.user_id`` out of the item's sources. ``NotWithdrawable`` when it is not a live
    fact or pending reflection resting on them; ``WithdrawRefused`` when the rule refuses (its
    reason says what to do instead) or it kept changing meanwhile."""
    for _ in range(ATTEMPTS):
        item = _candidate(store, w)
        if item is None:
            raise NotWithdrawable(f"no live {w.kind} resting on this user's messages")
        plan = withdrawal.plan(item, w.user_id, _run_messages(store, item))
        if (after := store.provenance.withdraw_user(plan)) is not None:
            store.leases.bump_scope_versions(item.agent_id, [item.scope_key])
            if isinstance(after, Fact):
                outbox.announce_changed(store.webhooks, [after], "fact.updated", "user", w.now, reason="withdrawn",
                                        also=[w.user_id])
            return WithdrawOut(w.kind, w.item_id, len(plan.message_ids), len(plan.drop_history))
    raise WithdrawRefused("the item kept changing while your part was taken out: list your memory and try again")
