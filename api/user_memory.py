"""Users' own memory (seed 004, design §12): list what an agent keeps about me, edit one of my
user-scope facts, delete one item, switch my user memory off or on.

Mine: my user-scope facts, reflections and blob. Also mine to see and delete (not to edit):
the shared items (agent scope) that rest only on my messages (``source_user_ids`` is me
alone). An edit is an UPDATE with history, screened like any write, and moves the scope's
version stamp, so cached contexts and search caches built over the old text go stale.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from api.errors import ApiError, NotFound
from ops.user_data import deletion_plan, delete_items
from pipeline.formation.screening import guard_for
from pipeline.formation.secrets import KIND_NAMES
from pipeline.store.port import FactUpdate
from pipeline.text import text_hash, word_count
from pipeline.validity import expired
from schemas import api as m
from schemas.documents import Fact, Reflection, scope_key
from schemas.values import text_problem


def _source(item: Fact | Reflection) -> m.Source:
    return m.Source(session_id=item.source_session_id, message_ids=list(item.source_message_ids),
                    run_id=item.source_run_id)


def _fact(f: Fact, editable: bool) -> m.MyFact:
    history = [m.FactVersionOut(content=h.content, version=h.version, changed_at=h.changed_at,
                                valid_from=h.valid_from, valid_to=h.valid_to) for h in f.history]
    return m.MyFact(id=f.fact_id, scope=f.scope, content=f.content, version=f.version, formed_at=f.formed_at,
                    updated_at=f.updated_at, editable=editable, source=_source(f), history=history,
                    expires_at=f.expires_at)


def _reflection(r: Reflection, editable: bool) -> m.MyReflection:
    return m.MyReflection(id=r.reflection_id, scope=r.scope, content=r.content, formed_at=r.formed_at,
                          absorbed=r.absorbed, editable=editable, source=_source(r))


def _sole_source(item: Fact | Reflection, user_id: str) -> bool:
    return bool(item.source_user_ids) and set(item.source_user_ids) == {user_id}


def my_items(
    store, agent_id: str, user_id: str, now: datetime | None = None,
) -> tuple[list[Fact], list[Reflection], list[Fact], list[Reflection]]:
    """(my live facts, newest first, less those expired by ``now`` if given; my reflections,
    oldest first; the shared ones resting only on me, in the same orders). Read through the
    provenance query (``Store.resting_on``): it costs what rests on the user, where listing
    the agent scope read every user's shared items."""
    resting = store.resting_on(user_id, agent_id)
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


def list_memory(store, agent_id: str, user_id: str, now: datetime) -> m.MyMemory:
    """What the agent keeps about the user at ``now`` (an expired fact is out, stamped or not)."""
    facts, reflections, shared_facts, shared_reflections = my_items(store, agent_id, user_id, now)
    blob = store.get_blob(agent_id, scope_key("user", user_id=user_id))
    return m.MyMemory(
        agent_id=agent_id, user_id=user_id,
        user_memory_enabled=not store.user_memory_off(agent_id, [user_id]),
        facts=[_fact(f, True) for f in facts], reflections=[_reflection(r, False) for r in reflections],
        blob=m.MyBlob(content=blob.consolidated_content, version=blob.version,
                      last_consolidated_at=blob.last_consolidated_at) if blob and blob.version else None,
        shared_facts=[_fact(f, False) for f in shared_facts],
        shared_reflections=[_reflection(r, False) for r in shared_reflections],
    )


def edit_fact(service, agent_id: str, user_id: str, fact_id: str, content: str,
              where: str = "body content", expires_at: datetime | None = None) -> m.MyFact:
    """UPDATE one of my user-scope facts: free text as every door takes it (``schemas.values``),
    screened for secrets like any write (design §12), at most the fact word limit, with the
    old text kept in its history; ``expires_at`` (if given, in the future) becomes its expiry.
    ``where`` names the new text's field in errors."""
    store, settings = service.store, service.settings
    now = service.clock.now()
    if expires_at is not None and expires_at <= now:
        raise ApiError("invalid request", "body expires_at",
                       f"{expires_at.isoformat()} is not in the future: a fact cannot be set to have expired", status=422)
    fact = next((f for f in store.get_facts([fact_id])
                 if f.agent_id == agent_id and f.retired_at is None and not expired(f, now)), None)
    if fact is None or fact.scope_key != scope_key("user", user_id=user_id):
        raise NotFound("no such fact among this user's own facts (shared facts are not editable)",
                       "path fact_id")
    if problem := text_problem(content):
        raise ApiError("invalid request", where, problem, status=422)
    text = " ".join(content.split())
    if not text:
        raise ApiError("invalid request", where, "the new text is blank", status=422)
    if word_count(text) > settings.fact_word_limit:
        raise ApiError("invalid request", where,
                       f"more than {settings.fact_word_limit} words (a fact is one short statement)", status=422)
    secret = guard_for(settings).kind(text)
    if secret is not None:   # named by its kind, never echoed
        raise ApiError("refused", where, f"the text carries {KIND_NAMES[secret]}, a secret; "
                       "memory never stores one", status=422)
    vector = service.embedder.embed([text])
    updated = store.update_fact(fact.fact_id, FactUpdate(
        content=text, hash=text_hash(text), embedding=vector.vectors[0],
        embedding_model=service.embedder.model, run_id=f"edit:{uuid.uuid4().hex}", now=now, valid_from=now,
        expected_version=fact.version, source_user_ids=(user_id,), source_text="", expires_at=expires_at,
    ))
    if not updated:
        raise ApiError("conflict", "body content", "the fact changed meanwhile, or this text is already one "
                       "of your facts; list your memory and try again", status=409)
    store.bump_scope_versions(agent_id, [fact.scope_key])
    return _fact(store.get_facts([fact.fact_id])[0], True)


def delete_item(deps, agent_id: str, user_id: str, kind: str, item_id: str, holder: str) -> m.Deleted:
    """Delete one of my items, or a shared item resting only on my messages, with its history;
    a consolidated blob that absorbed a deleted reflection is merged again without it."""
    facts, reflections, shared_facts, shared_reflections = my_items(deps.store, agent_id, user_id)
    pool = [*facts, *shared_facts] if kind == "fact" else [*reflections, *shared_reflections]
    item = next((i for i in pool if (i.fact_id if kind == "fact" else i.reflection_id) == item_id), None)
    if item is None:
        raise NotFound(f"no such {kind} among this user's items or the shared items resting only on them",
                       "path item_id")
    delete_items(deps, deletion_plan(deps.store, item), holder)
    return m.Deleted(deleted=item_id, kind=kind)  # type: ignore[arg-type]
