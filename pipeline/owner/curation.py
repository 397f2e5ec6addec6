"""Edits of stored memory by the people entitled to them (design §12, §13): a user's own facts,
an owner's agent-scope facts. One path for both, and for later direct writes: the text is
checked as stored free text, kept within the fact word limit, screened like every write
(``screening.screen_write``: a secret anywhere, contact data in agent scope), embedded again,
and written as an UPDATE that keeps the old text in the fact's history; the scope's version
stamp moves so cached contexts and searches built over the old text go stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from pipeline.errors import InvalidInput, Refused
from pipeline.formation.screening import guard_for, screen_write
from pipeline.formation.secrets import KIND_NAMES
from pipeline.owner import categories as filing
from pipeline.owner import metadata_keys as labelling
from pipeline.store.port import FactUpdate, LeaseStore, ReflectionStore
from pipeline.text import text_hash, word_count
from pipeline.webhooks import outbox
from schemas.documents import Fact, Reflection
from schemas.metadata import merged
from schemas.values import text_problem

def storable(text: str, where: str) -> str:
    """``text`` if it may be stored at all: free text as every door takes it (``schemas.values``:
    no NUL, no lone surrogate; design §13 "Errors")."""
    if problem := text_problem(text):
        raise InvalidInput(where, problem)
    return text


def checked_line(text: str, scope: str, *, settings, word_limit: int, people: Sequence[str] = (),
                 where: str = "content") -> str:
    """One memory line as it may be written in ``scope``: on one line, not blank, within
    ``word_limit`` words, with no secret and (agent scope) no contact data of ``people``.
    Raises ``InvalidInput`` naming the rule, never echoing the text."""
    line = " ".join(storable(text, where).split())
    if not line:
        raise InvalidInput(where, "the new text is blank")
    if word_count(line) > word_limit:
        raise InvalidInput(where, f"more than {word_limit} words (the limit of one item here)")
    verdict = screen_write(line, scope, guard=guard_for(settings), people=people)
    if verdict.dropped:
        shared = " in shared (agent) memory" if scope == "agent" and guard_for(settings).kind(line) is None else ""
        found = KIND_NAMES.get(verdict.found, verdict.found)   # named by its kind, never echoed
        raise Refused(where, f"the text carries {found}{shared}; memory never stores "
                             f"{'it there' if shared else 'a secret'}")
    return line


def check_expiry(expires_at: datetime | None, now: datetime, where: str = "expires_at") -> None:
    """An expiry a person sets must lie in the future. A past one is refused rather than read as
    "expired now": the edit opens a new version valid from ``now``, and a version cannot end
    before it begins; whoever wants the fact gone deletes it (design §13 "Expiry")."""
    if expires_at is not None and expires_at <= now:
        raise InvalidInput(where, f"{expires_at.isoformat()} is not in the future: a fact cannot be set to have "
                                  "expired (delete it instead)")


def edit_fact(service, fact: Fact, content: str, *, people: Sequence[str] = (), source_user_ids: Sequence[str] = (),
              where: str = "content", expires_at: datetime | None = None, clear_expiry: bool = False,
              expiry_where: str = "expires_at", categories: Sequence[str] | None = None,
              categories_where: str = "categories", metadata: Mapping[str, Any] | None = None,
              metadata_where: str = "metadata", metadata_checked: bool = False,
              source: str = "owner") -> Fact | None:
    """UPDATE ``fact`` to ``content`` (checked), as an edit by a person rather than a run, with
    ``expires_at`` (in the future) as its new expiry if given, or none with ``clear_expiry``,
    ``categories`` (each from the agent's list; [] for none) as its categories if given, and
    ``metadata`` (keys from the agent's filterable ones; {} for none) as its whole metadata if
    given: it replaces the fact's, where formation joins (``metadata_checked``: an import line's,
    which its own rules checked; an export line restores keys no longer marked). Announced to
    webhooks as ``fact.updated`` by ``source`` (owner, user, import).
    None when the fact changed meanwhile, or another live fact of its scope already says this."""
    store, settings = service.store, service.settings
    now = service.clock.now()
    check_expiry(expires_at, now, expiry_where)
    agent = store.ingest.get_agent_settings(fact.agent_id) if categories is not None or metadata is not None else None
    if categories is not None:
        categories = filing.check_filed(categories, filing.current(agent), categories_where)
    if metadata is not None:
        if not metadata_checked:
            metadata = labelling.check_given(metadata, agent.metadata_keys, metadata_where, held=True)
        # one value stays a value and repeats go, as formation stores a key's values
        metadata = merged({}, metadata)
    text = checked_line(content, fact.scope, settings=settings, word_limit=settings.fact_word_limit, people=people,
                        where=where)
    vector = service.embedder.embed([text])
    updated = store.facts.update_fact(fact.fact_id, FactUpdate(
        content=text, hash=text_hash(text), embedding=vector.vectors[0], embedding_model=service.embedder.model,
        run_id=f"edit:{uuid.uuid4().hex}", now=now, valid_from=now, expected_version=fact.version,
        source_user_ids=tuple(source_user_ids), source_text="", expires_at=expires_at, clear_expiry=clear_expiry,
        categories=categories, replace_metadata=metadata,
    ))
    if not updated:
        return None
    store.leases.bump_scope_versions(fact.agent_id, [fact.scope_key])
    stored = store.facts.get_facts([fact.fact_id])[0]
    outbox.announce_changed(store.webhooks, [stored], "fact.updated", source, now)
    return stored


class ReflectionEdits(Protocol):
    """What an edit of a pending reflection writes: the reflection and its scope's stamp."""

    reflections: ReflectionStore
    leases: LeaseStore


def edit_reflection(store: ReflectionEdits, settings, reflection: Reflection, content: str, *, by: str, now,
                    people: Sequence[str] = (), where: str = "content") -> Reflection | None:
    """Replace the text of a reflection waiting for consolidation (checked as a fact's, within
    the reflection word limit), the old text kept in its history. None once it is absorbed."""
    text = checked_line(content, reflection.scope, settings=settings, word_limit=settings.reflection_word_limit,
                        people=people, where=where)
    edited = store.reflections.edit_reflection(reflection.reflection_id, text, now, by)
    if edited is not None:
        store.leases.bump_scope_versions(reflection.agent_id, [reflection.scope_key])
    return edited
