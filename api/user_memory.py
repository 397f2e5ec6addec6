"""Users' own memory (seed 004, design §12): list what an agent keeps about me, edit one of my
user-scope facts or a section of my blob, delete one item, switch my user memory off or on.
My one-to-one sessions' memory (sessions whose only human is me) is mine to see, and their
reflections mine to delete.

Mine: my user-scope facts, reflections and blob. Also mine to see and delete (not to edit):
the shared items (agent scope) that rest only on my messages (``source_user_ids`` is me
alone). An edit is an UPDATE with history, screened like any write, and moves the scope's
version stamp, so cached contexts and search caches built over the old text go stale.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from api.errors import ApiError, NotFound
from pipeline.owner import curation
from pipeline.validity import expired
from schemas import api as m
from schemas.access import subject_digest
from schemas.documents import Fact, Reflection, scope_key
from usecases.audit import Audited
from usecases.edit import Edited, delete_items, deletion_plan
from usecases.withdraw import NotWithdrawable, WithdrawIn, WithdrawRefused, withdraw


def _source(item: Fact | Reflection) -> m.Source:
    return m.Source(session_id=item.source_session_id, message_ids=list(item.source_message_ids),
                    run_id=item.source_run_id, written_by=item.source)


def fact_out(f: Fact, editable: bool) -> m.MyFact:
    history = [m.FactVersionOut(content=h.content, version=h.version, changed_at=h.changed_at,
                                valid_from=h.valid_from, valid_to=h.valid_to) for h in f.history]
    return m.MyFact(id=f.fact_id, scope=f.scope, content=f.content, version=f.version, formed_at=f.formed_at,
                    updated_at=f.updated_at, editable=editable, source=_source(f), history=history,
                    expires_at=f.expires_at, categories=f.categories, metadata=f.metadata)


def reflection_out(r: Reflection, editable: bool) -> m.MyReflection:
    return m.MyReflection(id=r.reflection_id, scope=r.scope, content=r.content, formed_at=r.formed_at,
                          absorbed=r.absorbed, editable=editable, source=_source(r),
                          history=[m.ReflectionVersionOut(content=h.content, changed_at=h.changed_at)
                                   for h in r.history])


def _sole_source(item: Fact | Reflection, user_id: str) -> bool:
    return bool(item.source_user_ids) and set(item.source_user_ids) == {user_id}


def my_items(
    store, agent_id: str, user_id: str, now: datetime | None = None, resting=None,
) -> tuple[list[Fact], list[Reflection], list[Fact], list[Reflection]]:
    """(my live facts, newest first, less those expired by ``now`` if given; my reflections,
    oldest first; the shared ones resting only on me, in the same orders). Read through the
    provenance query (``Store.resting_on``, or ``resting`` already read): it costs what rests
    on the user, where listing the agent scope read every user's shared items."""
    resting = resting if resting is not None else store.provenance.resting_on(user_id, agent_id)
    mine = scope_key("user", user_id=user_id)
    agent = scope_key("agent")
    live = (f for f in resting.facts if f.retired_at is None and not (now and expired(f, now)))
    facts = sorted(live, key=lambda f: f.formed_at, reverse=True)
    reflections = sorted(resting.reflections, key=lambda r: r.formed_at)
    return (
        [f for f in facts if f.scope_key == mine],
        [r for r in reflections if r.scope_key == mine],
        [f for f in facts if f.scope_key == agent and _sole_source(f, user_id)],
        [r for r in reflections if r.scope_key == agent and _sole_source(r, user_id)],
    )


def own_sessions(store, agent_id: str, user_id: str, resting) -> list[str]:
    """The sessions with memory resting on the user whose only human is the user (design §13:
    a user sees their one-to-one sessions' memory, never a group's)."""
    ids = dict.fromkeys(r.session_id for r in resting.reflections if r.scope == "session" and r.session_id)
    found = []
    for session_id in ids:
        session = store.ingest.get_session(session_id)
        if session is not None and session.agent_id == agent_id and list(dict.fromkeys(session.users)) == [user_id]:
            found.append(session_id)
    return found


def _blob_out(blob) -> m.MyBlob | None:
    return m.MyBlob(content=blob.consolidated_content, version=blob.version,
                    last_consolidated_at=blob.last_consolidated_at) if blob and blob.version else None


def _session(store, agent_id: str, session_id: str) -> m.MySession:
    key = scope_key("session", session_id=session_id)
    return m.MySession(session_id=session_id, blob=_blob_out(store.blobs.get_blob(agent_id, key)),
                       reflections=[reflection_out(r, True) for r in store.reflections.unabsorbed_reflections(agent_id, key)])


def list_memory(store, agent_id: str, user_id: str, now: datetime) -> m.MyMemory:
    """What the agent keeps about the user at ``now`` (an expired fact is out, stamped or not)."""
    resting = store.provenance.resting_on(user_id, agent_id)
    facts, reflections, shared_facts, shared_reflections = my_items(store, agent_id, user_id, now, resting)
    blob = store.blobs.get_blob(agent_id, scope_key("user", user_id=user_id))
    return m.MyMemory(
        agent_id=agent_id, user_id=user_id,
        user_memory_enabled=not store.access.user_memory_off(agent_id, [user_id]),
        facts=[fact_out(f, True) for f in facts],
        reflections=[reflection_out(r, not r.absorbed) for r in reflections],
        blob=_blob_out(blob),
        shared_facts=[fact_out(f, False) for f in shared_facts],
        shared_reflections=[reflection_out(r, False) for r in shared_reflections],
        sessions=[_session(store, agent_id, s) for s in own_sessions(store, agent_id, user_id, resting)],
    )


def edit_fact(service, agent_id: str, user_id: str, fact_id: str, content: str,
              where: str = "content", expires_at: datetime | None = None, clear_expiry: bool = False,
              categories: list[str] | None = None, metadata: dict[str, Any] | None = None) -> Edited[m.MyFact]:
    """UPDATE one of my user-scope facts (``pipeline.owner.curation.edit_fact``): free text as
    every door takes it, screened like any write (a secret refused by its kind), at most the
    fact word limit, with the old text kept in its history; ``expires_at`` (if given, in the
    future) becomes its expiry, ``clear_expiry`` removes it, ``categories`` become its
    categories and ``metadata`` (the agent's filterable keys only, as for an owner) its whole
    metadata. ``where`` names the field in errors."""
    store, now = service.store, service.clock.now()
    fact = next((f for f in store.facts.get_facts([fact_id])
                 if f.agent_id == agent_id and f.retired_at is None and not expired(f, now)), None)
    if fact is None or fact.scope_key != scope_key("user", user_id=user_id):
        raise NotFound("no such fact among this user's own facts (shared facts are not editable)",
                       "path fact_id")
    updated = curation.edit_fact(service, fact, content, people=[user_id], source_user_ids=[user_id], where=where,
                                 expires_at=expires_at, clear_expiry=clear_expiry, categories=categories,
                                 metadata=metadata, source="user")
    if updated is None:
        raise ApiError("conflict", "body content", "the fact changed meanwhile, or this text is already one "
                       "of your facts; list your memory and try again", status=409)
    return Edited(fact_out(updated, True), Audited("item.edit", agent_id, subject_digest(agent_id, user_id)))


def edit_reflection(store, settings, agent_id: str, user_id: str, reflection_id: str, content: str, *, by: str,
                    now) -> Edited[m.MyReflection]:
    """Edit one of my reflections waiting for consolidation (user scope, or a session of mine
    alone), screened, with the old text kept in its history."""
    resting = store.provenance.resting_on(user_id, agent_id)
    _, reflections, _, _ = my_items(store, agent_id, user_id, resting=resting)
    sessions = set(own_sessions(store, agent_id, user_id, resting))
    pool = [*reflections, *(r for r in resting.reflections if r.scope == "session" and r.session_id in sessions)]
    found = next((r for r in pool if r.reflection_id == reflection_id and not r.absorbed), None)
    if found is None:
        raise NotFound("no such reflection of this user waiting for consolidation", "path item_id")
    edited = curation.edit_reflection(store, settings, found, content, by=by, now=now, people=[user_id])
    if edited is None:
        raise ApiError("conflict", "path item_id", "a consolidation absorbed it meanwhile; edit your blob instead",
                       status=409)
    return Edited(reflection_out(edited, True), Audited("item.edit", agent_id, subject_digest(agent_id, user_id),
                                                        {"reflections": 1}))


def delete_item(deps, agent_id: str, user_id: str, kind: str, item_id: str, holder: str) -> Edited[m.Deleted]:
    """Delete one of my items, or a shared item resting only on my messages, with its history;
    a consolidated blob that absorbed a deleted reflection is merged again without it."""
    resting = deps.store.provenance.resting_on(user_id, agent_id)
    facts, reflections, shared_facts, shared_reflections = my_items(deps.store, agent_id, user_id, resting=resting)
    sessions = set(own_sessions(deps.store, agent_id, user_id, resting))
    mine_in_sessions = [r for r in resting.reflections if r.scope == "session" and r.session_id in sessions]
    pool = [*facts, *shared_facts] if kind == "fact" else [*reflections, *shared_reflections, *mine_in_sessions]
    item = next((i for i in pool if (i.fact_id if kind == "fact" else i.reflection_id) == item_id), None)
    if item is None:
        raise NotFound(f"no such {kind} among this user's items or the shared items resting only on them",
                       "path item_id")
    delete_items(deps, deletion_plan(deps.store, item), holder, source="user")
    return Edited(m.Deleted(deleted=item_id, kind=kind),  # type: ignore[arg-type]
                  Audited("item.delete", agent_id, subject_digest(agent_id, user_id), {kind + "s": 1}))


def withdraw_item(store, agent_id: str, user_id: str, kind, item_id: str, now: datetime) -> Edited[m.Withdrawn]:
    """Take my part out of a shared item (``usecases.withdraw``): 404 when it is not a live fact
    or pending reflection resting on me, 409 when the rule refuses (the message says what to do
    instead: remove it when it rests on me alone, else ask the owner or to be forgotten)."""
    try:
        done = withdraw(store, WithdrawIn(agent_id=agent_id, user_id=user_id, kind=kind, item_id=item_id, now=now))
    except NotWithdrawable as exc:
        raise NotFound(str(exc), "path item_id") from exc
    except WithdrawRefused as exc:
        raise ApiError("conflict", "path item_id", exc.reason, status=409) from exc
    return Edited(m.Withdrawn(withdrawn=item_id, kind=kind, messages_out=done.messages_out,
                              versions_out=done.versions_out),
                  Audited("item.withdraw", agent_id, subject_digest(agent_id, user_id),
                          {kind + "s": 1, "messages_out": done.messages_out}))

