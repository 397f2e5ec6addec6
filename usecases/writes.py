"""Direct writes (design §13 "Direct writes and import"): a fact, or a reflection into a scope's
buffer, stored verbatim with no LLM call.

The text passes the checks of every person's write (``pipeline.owner.curation.checked_line``:
stored free text, one line within the item's word limit, no secret anywhere, no contact data in
shared memory), is embedded by the configured embedder (a fact), and is stamped with where it
came from (``source``: ``owner``, ``user`` or ``import``). An exact duplicate (the same
normalized-text hash, per agent and scope key, as formation's dedup uses) is refused with
``Duplicate`` naming the item that holds it. The scope's version stamp moves, so cached
contexts and searches see the new item at once. A new fact is announced to the agent's webhooks
as ``fact.created`` with its ``source``, as a run announces the facts it forms; a reflection is
announced when a consolidation merges it into the blob (``memory.consolidated``), as formation's
are.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from pipeline.clock import Clock
from pipeline.errors import Duplicate, InvalidInput
from pipeline.owner import categories as filing
from pipeline.owner import metadata_keys as labelling
from pipeline.owner.curation import checked_line
from pipeline.text import text_hash
from pipeline.webhooks import outbox
from schemas.access import subject_digest
from schemas.documents import Fact, Reflection, Scope, scope_key
from schemas.settings import Settings
from usecases.audit import Audited
from usecases.edit import Edited
from usecases.lookup import known_session

W = TypeVar("W", Fact, Reflection)

#: who wrote an item no run formed (``Fact.source``)
WriteSource = Literal["owner", "user", "import"]


class WriteDeps(Protocol):
    """What a write needs: the store, settings, the configured embedder and the clock
    (``pipeline.service.MemoryService`` and ``workers.deps.Deps`` both are one)."""

    store: object
    settings: Settings
    embedder: object
    clock: Clock


@dataclass(frozen=True)
class FactWrite:
    """A fact to store: in the agent's shared memory (``user_id`` None) or a user's."""

    agent_id: str
    content: str
    source: WriteSource
    user_id: str | None = None
    expires_at: datetime | None = None
    categories: Sequence[str] = ()
    # metadata of the agent's filterable keys (``pipeline.owner.metadata_keys``), as a message's
    metadata: Mapping[str, Any] | None = None
    where: str = "content"             # the field the caller sent the text in, for errors
    categories_where: str = "categories"   # and the categories (the CLI's --category)
    metadata_where: str = "metadata"   # and the metadata (the CLI's --meta)


@dataclass(frozen=True)
class ReflectionWrite:
    """A reflection for the buffer of the agent's memory, a user's or a session's; the next
    consolidation of that scope merges it into the blob."""

    agent_id: str
    content: str
    source: WriteSource
    user_id: str | None = None
    session_id: str | None = None
    where: str = "content"
    session_where: str = "session_id"   # the field the caller named the session in (the CLI's --session)


@dataclass(frozen=True)
class Target:
    """The scope a write lands in, and the people whose contact data it may not carry."""

    scope: Scope
    key: str
    user_id: str | None = None
    session_id: str | None = None
    people: list[str] = field(default_factory=list)


def target(user_id: str | None, session_id: str | None = None) -> Target:
    if user_id and session_id:
        raise InvalidInput("session_id", "a write goes to a user's memory or a session's, not both")
    if user_id:
        return Target("user", scope_key("user", user_id=user_id), user_id=user_id, people=[user_id])
    if session_id:
        return Target("session", scope_key("session", session_id=session_id), session_id=session_id)
    return Target("agent", scope_key("agent"))


def check_writable(deps: WriteDeps, agent_id: str, to: Target) -> None:
    """A user who switched their memory with this agent off (design §12) gets nothing written
    to it, by anyone: the switch is theirs."""
    if to.user_id and deps.store.access.user_memory_off(agent_id, [to.user_id]):
        raise InvalidInput("user_id", f"user {to.user_id!r} switched their memory with this agent off; "
                                      "nothing is written to it until they switch it on")


def checked_categories(deps: WriteDeps, agent_id: str, categories: Sequence[str],
                       where: str = "categories") -> list[str]:
    """``categories`` as stored: each one of the agent's categories (``pipeline.owner.categories``,
    the rule an edit follows), in the order given, repeats dropped."""
    if not categories:
        return []
    return filing.check_filed(categories, filing.current(deps.store.ingest.get_agent_settings(agent_id)), where)


def checked_metadata(deps: WriteDeps, agent_id: str, metadata: Mapping[str, Any] | None,
                     where: str = "metadata") -> dict[str, Any]:
    """``metadata`` as stored: each key one of the agent's filterable keys, each value a metadata
    value (``pipeline.owner.metadata_keys.check_given``), else ``InvalidInput`` naming it."""
    if not metadata:
        return {}
    return labelling.check_given(metadata, deps.store.ingest.get_agent_settings(agent_id).metadata_keys, where)


def new_fact(deps: WriteDeps, write: FactWrite, *, fact_id: str | None = None, embed: bool = True, **kept) -> Fact:
    """The fact ``write`` describes, checked and embedded (without ``embed``: its vector left to
    the caller, who embeds a batch at once), not yet stored; ``kept`` carries the fields of a
    record being restored (its history, times, provenance)."""
    to = target(write.user_id)
    check_writable(deps, write.agent_id, to)
    text = checked_line(write.content, to.scope, settings=deps.settings, word_limit=deps.settings.fact_word_limit,
                        people=to.people, where=write.where)
    vector = deps.embedder.embed([text]).vectors[0] if embed else None
    now = deps.clock.now()
    values = dict(fact_id=fact_id or f"fact-{uuid.uuid4().hex}", agent_id=write.agent_id,
                  scope=to.scope, user_id=to.user_id, scope_key=to.key, content=text, hash=text_hash(text),
                  embedding=vector, embedding_model=deps.embedder.model if embed else None, source=write.source,
                  source_user_ids=to.people, formed_at=now, valid_from=now, expires_at=write.expires_at,
                  categories=checked_categories(deps, write.agent_id, write.categories, write.categories_where),
                  metadata=checked_metadata(deps, write.agent_id, write.metadata, write.metadata_where))
    return Fact.model_validate({**values, **kept})


def add_fact(deps: WriteDeps, write: FactWrite) -> Fact:
    """Store ``write`` as a new fact; ``Duplicate`` when a live fact of its scope already says it."""
    fact = new_fact(deps, write)
    inserted, holder = deps.store.facts.insert_fact(fact)
    if not inserted:
        raise Duplicate(write.where, holder)
    deps.store.leases.bump_scope_versions(fact.agent_id, [fact.scope_key])
    outbox.announce_changed(deps.store.webhooks, [fact], "fact.created", write.source, deps.clock.now())
    return fact


def add_reflection(deps: WriteDeps, write: ReflectionWrite) -> Reflection:
    """Store ``write`` in its scope's buffer; ``Duplicate`` when a reflection waiting there
    already says it (the same normalized text), ``NotStored`` when it names a session the agent
    does not have."""
    to = target(write.user_id, write.session_id)
    if to.session_id:
        known_session(deps.store.ingest, write.agent_id, to.session_id, write.session_where)
    check_writable(deps, write.agent_id, to)
    text = checked_line(write.content, to.scope, settings=deps.settings,
                        word_limit=deps.settings.reflection_word_limit, people=to.people, where=write.where)
    same = text_hash(text)
    for waiting in deps.store.reflections.unabsorbed_reflections(write.agent_id, to.key):
        if text_hash(waiting.content) == same:
            raise Duplicate(write.where, waiting.reflection_id, "reflection")
    reflection = Reflection(reflection_id=f"refl-{uuid.uuid4().hex}", agent_id=write.agent_id, scope=to.scope,
                            user_id=to.user_id, session_id=to.session_id, scope_key=to.key, content=text,
                            source_user_ids=to.people, source=write.source, formed_at=deps.clock.now())
    deps.store.reflections.insert_reflections([reflection])
    deps.store.leases.bump_scope_versions(write.agent_id, [to.key])
    return reflection


def written(item: W) -> Edited[W]:
    """A direct write's result for the doors (``usecases.audit.recorded``): the stored item and
    its audit entry, ``item.add``, the subject a user's pseudonym, or the shared memory
    (``agent``, ``session``) it went into; never its text."""
    kind = "facts" if isinstance(item, Fact) else "reflections"
    subject = (subject_digest(item.agent_id, item.user_id) if item.user_id
               else "session" if item.scope == "session" else "agent")
    return Edited(item, Audited("item.add", item.agent_id, subject, {kind: 1}))
