"""What a happening announces to webhooks (design §13 "Operator controls"). Pure: the caller
loads what the functions read.

Every event id is derived from the happening (the run and the fact, the erasure job), so a
stage rerun or a redelivered task that announces again queues nothing twice. Events carry
ids, kinds and timestamps; ``subjects`` (never sent) name the people an event is about, so an
erasure can withdraw what is still queued about them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from schemas.documents import Fact, FormationRun
from schemas.webhooks import WebhookEvent


def touched_fact_ids(run: FormationRun, effects: Iterable) -> list[str]:
    """Every fact a run's effects may have created, changed or retired: those the effects
    name, and those added in their place when another run had changed or retired the target
    meanwhile (``effect_notes``' ``added``)."""
    ids = [e.fact_id for e in effects]
    ids += [n["added"] for n in run.effect_notes if n.get("added")]
    return list(dict.fromkeys(ids))


def fact_events(run: FormationRun, facts: Sequence[Fact], now: datetime) -> list[WebhookEvent]:
    """What the run did to each fact, read from the facts as stored after its effects: created
    (by this run, still live), updated (a history entry of this run) or retired (by this run).
    A past version added already retired (an older statement formed late) announces nothing:
    nothing live changed."""
    events = []
    for fact in facts:
        created = fact.source_run_id == run.run_id and not any(h.run_id == run.run_id for h in fact.history)
        if fact.retired_by == run.run_id:
            kind = None if created else "fact.retired"
        elif created:
            kind = "fact.created"
        elif any(h.run_id == run.run_id for h in fact.history):
            kind = "fact.updated"
        else:
            kind = None
        if kind is not None:
            events.append(_fact_event(run, fact, kind, now))
    return events


def _fact_event(run: FormationRun, fact: Fact, kind: str, now: datetime) -> WebhookEvent:
    occurred = fact.retired_at if kind == "fact.retired" else fact.updated_at or fact.formed_at
    why = {"reason": fact.retired_reason} if kind == "fact.retired" else {}   # "contradicted", ...
    return WebhookEvent(
        event_id=f"{run.run_id}:{kind}:{fact.fact_id}", kind=kind, agent_id=run.agent_id,
        occurred_at=occurred or now,
        data={"fact_id": fact.fact_id, "scope": fact.scope, "version": fact.version, "run_id": run.run_id,
              "session_id": run.session_id, **why},
        subjects=_people(fact.user_id, fact.source_user_ids), content_ref=f"fact:{fact.fact_id}",
    )


def expired_event(fact: Fact, now: datetime) -> WebhookEvent:
    """A fact beat's expiry task retired (``pipeline.expiry``): no run did it, so its id is
    the fact's own, the same on every rerun."""
    return WebhookEvent(
        event_id=f"expiry:fact.retired:{fact.fact_id}", kind="fact.retired", agent_id=fact.agent_id,
        occurred_at=fact.retired_at or now,
        data={"fact_id": fact.fact_id, "scope": fact.scope, "version": fact.version, "reason": "expired"},
        subjects=_people(fact.user_id, fact.source_user_ids), content_ref=f"fact:{fact.fact_id}",
    )


def changed_fact_event(fact: Fact, kind: str, source: str, change_id: str, now: datetime, *,
                       reason: str | None = None, also: Iterable[str] = ()) -> WebhookEvent:
    """A change to a fact that no run made: a person's write, edit, deletion or withdrawal, or
    an import's line. ``source`` (owner | user | import) says who made it, where a run's event
    names the run; ``change_id`` is the change's own, since nothing reruns a person's request.
    ``also`` names people the change was about who no longer appear in the fact (a withdrawal's
    person), so that their erasure withdraws the notice too."""
    why = {"reason": reason} if reason else {}
    return WebhookEvent(
        event_id=f"{change_id}:{kind}:{fact.fact_id}", kind=kind, agent_id=fact.agent_id, occurred_at=now,
        data={"fact_id": fact.fact_id, "scope": fact.scope, "version": fact.version, "source": source, **why},
        subjects=_people(fact.user_id, [*fact.source_user_ids, *also]), content_ref=f"fact:{fact.fact_id}",
    )


def consolidated_event(agent_id: str, scope_key: str, version: int, user_id: str | None, now: datetime,
                       run_id: str | None = None, source: str | None = None) -> WebhookEvent:
    """A blob merged to a new version (by a run; or written by a person or an import, who is
    then its ``source``). Its content (opt-in) is read when sent: an erasure rebuilds the blob
    first, so what is sent never holds an erased person."""
    by = {"source": source} if source else {}
    return WebhookEvent(
        event_id=f"{agent_id}:memory.consolidated:{scope_key}:{version}", kind="memory.consolidated",
        agent_id=agent_id, occurred_at=now,
        data={"scope": scope_key.split(":", 1)[0], "scope_key": scope_key, "version": version, "run_id": run_id,
              **by},
        subjects=_people(user_id, ()), content_ref=f"blob:{scope_key}",
    )


def run_failed_event(run: FormationRun, users: Sequence[str], now: datetime) -> WebhookEvent:
    """A run that failed or is dead: its reason's kind only (an error text may quote a
    provider's answer, hence content)."""
    reason = (run.error or "").split(":", 1)[0][:80] or None
    return WebhookEvent(
        event_id=f"{run.run_id}:run.failed:{run.attempts}:{run.status}", kind="run.failed", agent_id=run.agent_id,
        occurred_at=now,
        data={"run_id": run.run_id, "session_id": run.session_id, "status": run.status, "reason": reason,
              "attempts": run.attempts},
        subjects=list(users),
    )


def user_forgotten_event(agent_id: str, user_id: str, erasure_id: str, now: datetime) -> WebhookEvent:
    """The notice that a person was erased: the platform's own id for them, so it can erase
    its copies too; nothing else about them."""
    return WebhookEvent(event_id=f"{erasure_id}:user.forgotten:{agent_id}", kind="user.forgotten",
                        agent_id=agent_id, occurred_at=now, data={"user_id": user_id})


def _people(user_id: str | None, sources: Iterable[str]) -> list[str]:
    return sorted({*filter(None, [user_id]), *sources})
