"""Applying decide_facts' effects to the store (design §5.3, §11). Called by the stage with
what earlier stages stored; every effect is idempotent on the run id.

- insert: a new fact, valid from the time its source message was sent; one that took in later
  facts of the run (a same-run merge) is valid from the latest of their messages, and all of
  them are its sources;
- update: the stored fact takes the merged text; its old text goes to history with its
  validity closed where the new text's opens (the new fact's source message time);
- retire: the contradicted fact is retired, valid until the new fact was said.

An UPDATE or DELETE of a fact that is no longer as decided on must not lose what either run
learned. Another run may have retired it between this run's decision and its effects (or it
was erased): the update adds the new fact as it was said (not the merged text, which holds
what was retired), the delete adds it as it always does. Another run may have changed it (an
UPDATE: the effect carries the version decided on): the update adds the new fact as said
instead of overwriting the other run's text, and the delete leaves the other run's text live
and adds its new fact. Each case is noted on the run (``effect_notes``: ``update_of_retired``,
``delete_of_retired``, ``update_of_changed``, ``delete_of_changed``).

An UPDATE whose new statement was said before the stored text became valid (an older
statement formed late, its session formed after the correction's) changes nothing live: the
newer stored text stays, and the older one is added as a past version, retired and valid until
the stored one (``update_of_newer``), so ``as_of`` still finds it. A DELETE of that kind is the
same: the newer stored fact is not retired, and the older statement's new fact is added as a
past version (``delete_of_newer``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from pipeline.formation.dedup import new_fact_id
from pipeline.formation.facts import NewFact
from pipeline.formation.outputs import DecideFactsOutput, Insert, Retire, Update
from pipeline.formation.provenance import Provenance
from pipeline.formation.scopes import ScopePlan
from pipeline.formation.screening import session_user_ids, storable_line
from pipeline.formation.secrets import SecretGuard
from pipeline.store.port import FactStore, FactUpdate, IngestStore, LeaseStore, RunStore
from pipeline.sources import message_sources
from schemas.documents import Fact, FormationRun, StoredMessage
from schemas.metadata import merged as joined_metadata


class EffectStore(Protocol):
    """What applying the fact effects of a run uses: the facts, the run's messages (when each
    text was said), the scope stamps, and the run's notes."""

    facts: FactStore
    ingest: IngestStore
    leases: LeaseStore
    runs: RunStore


def apply(
    store: EffectStore, run: FormationRun, output: DecideFactsOutput, *, now: datetime, plan: ScopePlan,
    new_facts: Sequence[NewFact], vectors: Sequence[Sequence[float]], sources: Sequence[Provenance],
    message_ids: Sequence[str], guard: SecretGuard, metadata_keys: Sequence[str] = (),
) -> None:
    """Apply ``output.effects`` (see the module docstring), record notes, bump the stamps.
    ``guard``: the run's secret patterns, which a fact's stored source line must pass too;
    ``metadata_keys``: the agent's filterable keys, which a fact keeps of its messages' metadata."""
    claimed = store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to) if output.effects else []
    run_effects = _RunEffects(
        store=store, run=run, output=output, now=now, plan=plan, vectors=vectors, sources=sources,
        message_ids=message_ids, guard=guard, claimed=claimed, said={f.index: f for f in new_facts},
        said_at=_said_at(claimed, sources, now), people=session_user_ids(run, plan, claimed),
        absorbed=_absorbed(output), metadata_keys=list(metadata_keys),
    )
    for effect in output.effects:
        if isinstance(effect, Retire):
            run_effects.retire(effect)
        elif isinstance(effect, Update):
            run_effects.update(effect)
        else:
            # a text merged from two facts of this run was embedded again, like an UPDATE's
            run_effects.insert(effect.fact_id, effect.index, effect.text, effect.scope, effect.scope_key,
                               effect.hash, output.merged_vector(effect.index))
    run_effects.retire_superseded()
    notes = run_effects.notes
    if notes and notes != run.effect_notes:
        store.runs.update_run_fields(run.run_id, effect_notes=notes)
    keys = sorted({e.scope_key for e in output.effects if isinstance(e, (Insert, Update))})
    if keys:  # search caches are keyed by these stamps: the next dedup must see the new facts
        store.leases.bump_scope_versions(run.agent_id, keys)


def _absorbed(output: DecideFactsOutput) -> dict[str, list[int]]:
    """An ADD that took in later facts of the run (their decisions: NONE, merged_into_same_run):
    its fact id -> their indexes."""
    absorbed: dict[str, list[int]] = {}
    for d in output.decisions:
        if d.reason == "merged_into_same_run" and d.existing_id:
            absorbed.setdefault(d.existing_id, []).append(d.index)
    return absorbed


@dataclass
class _RunEffects:
    """One run's effects as they are applied: what each needs to know of the run, and the notes
    and past versions they leave behind."""

    store: EffectStore
    run: FormationRun
    output: DecideFactsOutput
    now: datetime
    plan: ScopePlan
    vectors: Sequence[Sequence[float]]
    sources: Sequence[Provenance]
    message_ids: Sequence[str]
    guard: SecretGuard
    claimed: Sequence[StoredMessage]
    said: dict[int, NewFact]
    said_at: Callable[[int], datetime]
    people: list[str]
    absorbed: dict[str, list[int]]
    metadata_keys: list[str]
    notes: list[dict] = field(default_factory=list)
    # new fact index -> when the newer stored text became valid
    superseded: dict[int, datetime] = field(default_factory=dict)

    def source_ids(self, index: int) -> list[str]:
        return [self.sources[index].message_id] if self.sources else list(self.message_ids)

    def source_text(self, index: int, scope_key: str) -> str | None:
        """The source message's line (the excerpt ends with it), which text search reads,
        if it may be stored with the fact (``screening.storable_line``)."""
        if not self.sources or not self.sources[index].excerpt:
            return None
        return storable_line(self.sources[index].excerpt[-1], scope_key.split(":", 1)[0], self.guard, self.people)

    def deadline(self, index: int) -> datetime | None:
        """The expiry said with the new fact ``index`` (None: none, or the stored one stays)."""
        return self.said[index].expires_at if index in self.said else None

    def filed(self, index: int) -> list[str]:
        """The categories the answer gave the new fact ``index``."""
        return list(self.said[index].categories) if index in self.said else []

    def kept_metadata(self, message_ids: Sequence[str]) -> dict:
        """The filterable keys of the metadata of these messages (those the run still holds: an
        erased one has none), their values joined in the order the messages were said."""
        kept: dict = {}
        wanted = set(message_ids) if self.metadata_keys else set()
        for message in self.claimed:
            if message.message_id in wanted and message.metadata:
                kept = joined_metadata(kept, message.metadata, self.metadata_keys)
        return kept

    def insert(self, fact_id: str, index: int, text: str, scope: str, key: str, digest: str, vector=None) -> str:
        # A merged text holds what each merged statement said: it is valid from the latest of
        # them (as an UPDATE's text is), its source line is that one's, and its sources are
        # all of theirs (an erasure of any of their speakers finds it)
        merged = [index, *self.absorbed.get(fact_id, [])]
        latest = max(merged, key=lambda i: (self.said_at(i), i))
        ids = list(dict.fromkeys(m for i in merged for m in self.source_ids(i)))
        run = self.run
        return self.store.facts.insert_fact(Fact(
            fact_id=fact_id, agent_id=run.agent_id, scope=scope,
            user_id=self.plan.user_id if scope == "user" else None,
            scope_key=key, content=text, hash=digest,
            embedding=vector or self.vectors[index], embedding_model=self.output.embedding_model,
            source_session_id=run.session_id, source_message_ids=ids,
            source_user_ids=message_sources(ids, self.claimed), source_text=self.source_text(latest, key),
            source_run_id=run.run_id, formed_at=self.now, valid_from=self.said_at(latest),
            expires_at=self.deadline(index),
            categories=list(dict.fromkeys(c for i in merged for c in self.filed(i))),
            metadata=self.kept_metadata(ids),
        ))[1]

    def insert_as_said(self, index: int) -> str:
        """Add the new fact ``index`` as it was said (not as merged into a stored text)."""
        fact = self.said[index]
        return self.insert(new_fact_id(self.run.run_id, index), index, fact.text, fact.scope,
                           fact.scope_key, fact.hash)

    def retire(self, effect: Retire) -> None:
        index = effect.index
        newer = _said_later(self.store.facts, effect.fact_id, self.said_at(index))
        if newer is not None:
            # as for an UPDATE below: an older statement formed late retires nothing; its
            # fact (the INSERT of the same index) is kept as a past version, valid until then
            self.superseded[index] = newer
            self.notes.append({"index": index, "fact_id": effect.fact_id, "note": "delete_of_newer"})
            return
        # the contradicted fact was valid until the new one was said
        if not self.store.facts.retire_fact(effect.fact_id, self.now, self.run.run_id, valid_to=self.said_at(index),
                                      expected_version=effect.version, reason="contradicted"):
            note = _changed_meanwhile(self.store.facts, self.run, effect, "delete")
            self.notes += [note] if note else []

    def update(self, effect: Update) -> None:
        index, run = effect.index, self.run
        newer = _said_later(self.store.facts, effect.fact_id, self.said_at(index))
        if newer is not None:
            # an older statement formed late (its session formed after the correction's):
            # the stored text stays; this one is kept as a past version, valid until it
            added = self.insert_as_said(index)
            self.store.facts.retire_fact(added, self.now, run.run_id, valid_to=newer, reason="superseded")
            self.notes.append({"index": index, "fact_id": effect.fact_id, "note": "update_of_newer",
                               "added": added})
            return
        if self.store.facts.update_fact(effect.fact_id, FactUpdate(
            content=effect.text, hash=effect.hash, embedding=self.output.merged_vector(index),
            embedding_model=self.output.embedding_model, run_id=run.run_id, now=self.now,
            valid_from=self.said_at(index), expected_version=effect.version,
            source_message_ids=self.source_ids(index),
            source_user_ids=message_sources(self.source_ids(index), self.claimed),
            source_text=self.source_text(index, effect.scope_key), expires_at=self.deadline(index),
            categories=self.filed(index) or None,
            metadata=self.kept_metadata(self.source_ids(index)) or None,
        )):
            return
        note = _changed_meanwhile(self.store.facts, run, effect, "update")
        if note:
            note["added"] = self.insert_as_said(index)
            self.notes.append(note)

    def retire_superseded(self) -> None:
        """The new facts of DELETEs of newer facts stay as past versions, valid until those."""
        for effect in self.output.effects:
            if isinstance(effect, Insert) and effect.index in self.superseded:
                self.store.facts.retire_fact(effect.fact_id, self.now, self.run.run_id,
                                       valid_to=self.superseded[effect.index], reason="superseded")


def _said_at(
    claimed: Sequence[StoredMessage], sources: Sequence[Provenance], now: datetime,
) -> Callable[[int], datetime]:
    """New fact index -> when its source message was sent (a fact is valid from then), never
    later than ``now``; ``now`` when the message is unknown (erased since)."""
    if not sources:
        return lambda index: now
    sent = {m.message_id: m.created_at for m in claimed}

    def at(index: int) -> datetime:
        created = sent.get(sources[index].message_id) if index < len(sources) else None
        return min(created, now) if created is not None else now

    return at


def _said_later(facts: FactStore, fact_id: str, said: datetime) -> datetime | None:
    """When the live fact an UPDATE names became valid, if that is after ``said`` (the new
    statement's time): the stored text is the newer one. None otherwise."""
    found = facts.get_facts([fact_id])
    fact = found[0] if found else None
    if fact is None or fact.retired_at is not None or fact.valid_from is None:
        return None
    return fact.valid_from if fact.valid_from > said else None


def _changed_meanwhile(facts: FactStore, run: FormationRun, effect: Update | Retire, action: str) -> dict | None:
    """The note when the fact an UPDATE or DELETE names is no longer as decided on: retired
    (by another run, or erased) or changed by another run since the decision. None when this
    run's own earlier apply (a rerun) or a text already live in the scope explains why the
    effect changed nothing."""
    found = facts.get_facts([effect.fact_id])
    fact = found[0] if found else None
    if fact is not None and (fact.retired_by == run.run_id or any(h.run_id == run.run_id for h in fact.history)):
        return None
    if fact is None or fact.retired_at is not None:
        note = f"{action}_of_retired"
    elif effect.version is not None and fact.version != effect.version:
        note = f"{action}_of_changed"
    else:
        return None
    return {"index": effect.index, "fact_id": effect.fact_id, "note": note,
            "retired_by": fact.retired_by if fact is not None else None}
