"""Owners' and users' edits of stored memory (design §12, §13): one fact, one reflection
waiting for consolidation, a section of a blob, a user's whole blob, the deletion of one item,
and a user's memory switch. Each result names its audit entry (``usecases.audit``); finding
the item a caller may touch stays with the door, which words "not found" its own way.

Every deletion goes through ``deletion_plan`` and ``delete_items``, so a change to what deleting
one item removes is a change here only.

Each change is announced to the agent's webhooks as formation announces the same change
(``pipeline.webhooks.outbox.announce_changed``), naming who made it (``source``: owner or
user): an edited fact ``fact.updated``, a deleted one ``fact.retired`` with the reason
``deleted``, a blob's new version ``memory.consolidated``. A reflection waiting in a buffer is
announced by no one, as formation announces none: the merge that takes it into the blob is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from pipeline import erasure
from pipeline.owner import blobs, curation
from pipeline.store.port import Store
from pipeline.webhooks import outbox
from schemas.access import subject_digest
from schemas.documents import ConsolidatedBlob, Fact, Reflection, scope_key
from usecases.audit import Audited
from usecases.lookup import known_session

T = TypeVar("T")
AGENT = scope_key("agent")


@dataclass(frozen=True)
class Edited(Generic[T]):
    """The item as stored after the change, and the audit entry the change makes."""
    item: T
    audit: Audited


# ------------------------------------------------------------------ the agent's memory ----
def agent_fact(store: Store, agent_id: str, fact_id: str) -> Fact | None:
    """A live fact of the agent's shared (agent) memory, or None."""
    return next((f for f in store.facts.get_facts([fact_id])
                 if f.agent_id == agent_id and f.scope_key == AGENT and f.retired_at is None), None)


def pending_agent_reflection(store: Store, agent_id: str, reflection_id: str) -> Reflection | None:
    """An agent-scope reflection still waiting for consolidation, or None."""
    return next((r for r in store.reflections.unabsorbed_reflections(agent_id, AGENT) if r.reflection_id == reflection_id), None)


def agent_facts(store: Store, agent_id: str, *, limit: int, offset: int = 0) -> tuple[list[Fact], int]:
    """A page of the agent-scope facts, newest first, and how many there are."""
    return store.facts.list_facts(agent_id, AGENT, limit=limit, offset=offset), store.facts.count_facts(agent_id, AGENT)


def pending_agent_reflections(store: Store, agent_id: str) -> list[Reflection]:
    return store.reflections.unabsorbed_reflections(agent_id, AGENT)


def edit_agent_fact(writer, fact: Fact, content: str, *, where: str = "content", **changes) -> Edited[Fact] | None:
    """An UPDATE of an agent-scope fact with history, screened (``pipeline.owner.curation``),
    with ``changes`` (its expiry, its categories) as ``curation.edit_fact`` takes them; None when
    the fact changed meanwhile or another agent fact already says this."""
    updated = curation.edit_fact(writer, fact, content, people=list(fact.source_user_ids), where=where, **changes)
    return None if updated is None else Edited(updated, Audited("item.edit", fact.agent_id, "agent", {"facts": 1}))


def edit_agent_reflection(store: Store, settings, found: Reflection, content: str, *, by: str, now: datetime,
                          where: str = "content") -> Edited[Reflection] | None:
    """A new text for a pending agent-scope reflection, with history; None when a
    consolidation absorbed it meanwhile."""
    edited = curation.edit_reflection(store, settings, found, content, by=by, now=now,
                                      people=list(found.source_user_ids), where=where)
    return None if edited is None else Edited(edited, Audited("item.edit", found.agent_id, "agent",
                                                              {"reflections": 1}))


def delete_agent_item(deps, item: Fact | Reflection, holder: str) -> Edited[dict[str, int]]:
    """Delete an agent-scope fact or pending reflection, with its history."""
    kind = "facts" if isinstance(item, Fact) else "reflections"
    counts = delete_items(deps, deletion_plan(deps.store, item), holder, source="owner")
    return Edited(counts, Audited("item.delete", item.agent_id, "agent", {kind: 1}))


def edit_section(store: Store, settings, agent_id: str, key: str, section: str, bullets: Sequence[str], *, by: str,
                 now: datetime, subject: str, people: Sequence[str] = (), source: str = "owner",
                 session_where: str = "session_id") -> Edited[ConsolidatedBlob]:
    """One section of a scope's blob rewritten (none: removed) by ``source`` (owner, or the
    user of the blob): a new version, screened. ``subject`` is what the audit names
    (``agent``, ``session``, a user's pseudonym). A session's blob is only the agent's own
    sessions' (``NotStored`` naming ``session_where`` otherwise)."""
    kind, _, session_id = key.partition(":")
    if kind == "session":
        known_session(store.ingest, agent_id, session_id, session_where)
    blob = blobs.edit_section(store, settings, agent_id, key, section, bullets, by=by, now=now, people=people,
                              source=source)
    return Edited(blob, Audited("blob.edit", agent_id, subject, {"version": blob.version}))


def replace_user_blob(store: Store, settings, agent_id: str, user_id: str, content: str, *, by: str,
                      now: datetime) -> Edited[ConsolidatedBlob]:
    """A user's whole blob replaced: a new version, the owner its source."""
    blob = blobs.replace_user_blob(store, settings, agent_id, user_id, content, by=by, now=now)
    return Edited(blob, Audited("blob.replace", agent_id, subject_digest(agent_id, user_id), {"version": blob.version}))


# ------------------------------------------------------------------ a user's switch -------
def user_memory_on(store: Store, agent_id: str, user_id: str) -> bool:
    return not store.access.user_memory_off(agent_id, [user_id])


def switch_user_memory(store: Store, agent_id: str, user_id: str, enabled: bool, now: datetime) -> Edited[bool]:
    """Switch the user's memory with this agent off or on (items are kept)."""
    store.access.set_user_memory(agent_id, user_id, enabled, now)
    return Edited(enabled, Audited("user_memory.switch", agent_id, subject_digest(agent_id, user_id),
                                   {"enabled": int(enabled)}))


# ------------------------------------------------------------------------ one item --------
def deletion_plan(store: Store, item: Fact | Reflection) -> erasure.Plan:
    """What deleting one item removes: the item with its history, the stamps of its scope key
    (caches built over it go stale), and for a reflection a blob already absorbed, the blob
    merged again from the rest (or dropped when nothing is left)."""
    plan = erasure.Plan(stamps={item.agent_id: [item.scope_key]})
    if isinstance(item, Fact):
        plan.fact_ids.append(item.fact_id)
        return plan
    plan.reflection_ids.append(item.reflection_id)
    if item.absorbed:
        keep = tuple(i for i in store.provenance.reflection_ids(item.agent_id, item.scope_key, absorbed_only=True)
                     if i != item.reflection_id)
        if keep:
            plan.rebuild.append(erasure.Rebuild(item.agent_id, item.scope_key, keep))
        else:
            plan.drop_blobs.append((item.agent_id, item.scope_key))
    return plan


def delete_items(deps, plan: erasure.Plan, holder: str, *, source: str) -> dict[str, int]:
    """Execute a deletion plan: blobs merged again first (under the consolidation leases of
    their scope keys), then the items removed (``Store.erase_memory``); each deleted fact and
    each new blob version announced as made by ``source`` (owner or user)."""
    from pipeline.formation.rebuild import holding, rebuild_blob

    store, now = deps.store, deps.clock.now()
    facts = store.facts.get_facts(plan.fact_ids)   # read before they go: the notice names their scope
    with holding(deps, plan.lease_keys(), holder):
        rebuilt = [rebuild_blob(deps, target, holder) for target in plan.rebuild]
        store.admin.erase_memory(plan)
    outbox.announce_changed(store.webhooks, facts, "fact.retired", source, now, reason="deleted")
    for target, done in zip(plan.rebuild, rebuilt):
        blob = store.blobs.get_blob(target.agent_id, target.scope_key) if done["status"] == "rebuilt" else None
        if blob is not None:
            outbox.announce_blob(store.webhooks, blob, source, now)
    return {"facts": len(plan.fact_ids), "reflections": len(plan.reflection_ids),
            "blobs_rebuilt": len(plan.rebuild), "blobs_deleted": len(plan.drop_blobs)}
