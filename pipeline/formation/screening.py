"""What a model's answer may not store (design §11), applied before its stage output is stored,
to LLM and offline answers alike, so a rerun reuses the screened output. Pure.

- An item that carries a secret (``pipeline.formation.secrets``) is dropped, whatever its scope.
- An agent-scope item that carries contact data (``pipeline.formation.contacts``) moves to the
  speaking user's scope in a one-to-one session with user memory on; otherwise (a group chat,
  or user memory off for the agent) it is dropped. Its text is unchanged.

A fact's stored source line (``Fact.source_text``) passes the same rules for the fact's scope
(``storable_line``), or is not stored.

Both are counted: ``secrets_dropped``, ``contacts_rescoped``, ``contacts_dropped``. Items whose
scope the run does not form are left to the scope filters (``facts``, ``reflections``), which
drop them anyway: screening never moves an item into memory it would not have reached.

Every other write path goes through the same rules (design §11, "What is never stored"):

- ``screen_write``: one item any writer wants to store (a user's edit of a fact or reflection,
  a ``remember`` tool call, a migrated v1 record). Call it before the write; store
  ``verdict.text`` in ``verdict.scope`` unless ``verdict.dropped``.
- ``screen_blob``: a consolidated blob a model or a migration wrote (consolidation output,
  blob rebuilds after erasure, migrated v1 blobs): lines that carry a secret go, and in agent
  scope lines that carry contact data; the rest is kept as written.
- ``screen_excerpt``: the source excerpt a run keeps on its ``embed_facts`` record (a derived
  copy of the conversation): a line that carries a secret is blanked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from pipeline.conversation import humans
from pipeline.formation.contacts import contact_kind
from pipeline.formation.provenance import Provenance
from pipeline.formation.scopes import ScopePlan
from pipeline.formation.secrets import SecretGuard
from pipeline.prompts.facts import ExtractedFact
from pipeline.prompts.reflections import ReflectionsAnswer
from schemas.documents import FormationRun, StoredMessage
from schemas.settings import Settings


@dataclass
class Screened:
    secrets_dropped: int = 0
    contacts_rescoped: int = 0
    contacts_dropped: int = 0
    kinds: dict[str, int] = field(default_factory=dict)   # secret and contact kinds seen

    def counts(self) -> dict:
        return asdict(self)

    def _saw(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


def session_user_ids(run: FormationRun, plan: ScopePlan, messages: Iterable[StoredMessage]) -> list[str]:
    """Every human of the run: whose ids agent-scope memory must not carry (design §11)."""
    return [*([plan.user_id] if plan.user_id else []), *run.user_ids, *humans(messages)]


def guard_for(settings: Settings) -> SecretGuard:
    """The secret guard of a deployment: the built-in kinds and ``MEMORY_SECRET_PATTERNS``."""
    return SecretGuard(settings.secret_patterns)


def _screen(
    items: Sequence[tuple[str, str]], scopes: Sequence[str], guard: SecretGuard, user_ids: Iterable[str],
    result: Screened, owner: str | None,
) -> list[tuple[str, str]]:
    """(scope, text) pairs kept, in order, with agent items carrying contact data re-scoped to
    ``owner``'s user scope (None: the run forms no user scope, they are dropped). Each item
    goes through ``screen_write``; an agent item the run does not form is checked for secrets
    only (the scope filter drops it, uncounted here)."""
    ids = [u for u in dict.fromkeys(user_ids) if u]
    kept = []
    for scope, text in items:
        checked = scope if scope != "agent" or "agent" in scopes else "session"   # "session": secrets only
        verdict = screen_write(text, checked, guard=guard, people=ids, owner=owner, counts=result)
        if not verdict.dropped:
            kept.append(("user", text) if verdict.outcome == "rescoped" else (scope, text))
    return kept


def storable_line(line: str, scope: str, guard: SecretGuard, user_ids: Iterable[str]) -> str | None:
    """A source message line stored with a fact for its text search (``Fact.source_text``), if
    the fact's own text could carry it: none with a secret, and none with contact data for an
    agent-scope fact. The fact itself stays; it only loses the line."""
    if not line.strip() or guard.kind(line) is not None:
        return None
    if scope == "agent" and contact_kind(line, [u for u in dict.fromkeys(user_ids) if u]) is not None:
        return None
    return line


def screen_facts(
    facts: Sequence[ExtractedFact], plan: ScopePlan, guard: SecretGuard, user_ids: Iterable[str],
) -> tuple[list[ExtractedFact], Screened]:
    """The facts of an extract_facts answer that may be stored, and what was screened out."""
    result = Screened()
    owner = plan.user_id if "user" in plan.fact_scopes else None
    kept = []
    for fact in facts:  # one at a time, as reflections: a kept fact keeps its other fields (expiry)
        kept += [fact.model_copy(update={"scope": scope, "text": text})
                 for scope, text in _screen([(fact.scope, fact.text)], plan.fact_scopes, guard, user_ids, result, owner)]
    return kept, result


def screen_reflections(
    answer: ReflectionsAnswer, plan: ScopePlan, guard: SecretGuard, user_ids: Iterable[str],
) -> tuple[ReflectionsAnswer, Screened]:
    """The reflections of an answer that may be stored; a re-scoped agent reflection joins the
    end of the user level, where the hierarchy filter then treats it like any user reflection."""
    result = Screened()
    owner = plan.user_id if "user" in plan.reflection_scopes else None
    by_level: dict[str, list] = {"agent": [], "user": [], "session": []}
    for level in ("agent", "user", "session"):
        for item in getattr(answer, level):  # one at a time: a kept item keeps its cited sources
            for scope, _ in _screen([(level, item.text)], plan.reflection_scopes, guard, user_ids, result, owner):
                by_level[scope].append(item)
    return ReflectionsAnswer(**by_level), result


# --- every other write path (design §11) -----------------------------------------------------


@dataclass(frozen=True)
class WriteVerdict:
    """What ``screen_write`` allows: ``text`` stored in ``scope`` (for ``user_id`` when the
    scope is ``user``), or nothing (``dropped``). ``found``: the secret or contact kind seen."""

    outcome: Literal["kept", "rescoped", "dropped"]
    text: str | None
    scope: str | None
    user_id: str | None = None
    found: str | None = None

    @property
    def dropped(self) -> bool:
        return self.outcome == "dropped"


def screen_write(
    text: str, scope: str, *, guard: SecretGuard, people: Iterable[str] = (), owner: str | None = None,
    user_id: str | None = None, counts: Screened | None = None,
) -> WriteVerdict:
    """Screen one item before any write path stores it (design §11): the single guard that
    formation, consolidation, rebuilds, ``migrate-v1`` and write APIs (a user's edit, a
    ``remember`` call) share.

    - ``text`` carries a secret (``guard``: ``guard_for(settings)``): dropped, whatever the scope.
    - ``scope`` is ``agent`` and ``text`` carries contact data (an email address, a phone
      number, or one of ``people``: the user ids concerned, e.g. the caller and the session's
      humans): moved to ``owner``'s user scope when there is one (the one user it came from, in
      a one-to-one exchange, with user memory on), otherwise dropped.
    - Anything else is kept as it is (``user_id`` passes through for a user-scope item).

    ``counts`` (a run's ``Screened``) adds ``secrets_dropped``, ``contacts_rescoped``,
    ``contacts_dropped`` and the kind seen; the text itself is never recorded.

    A user's edit of their own fact, or a ``remember`` call for the caller::

        verdict = screen_write(text, fact.scope, guard=guard_for(settings), people=[user_id],
                               owner=user_id if user_memory_on else None, user_id=user_id)
        if verdict.dropped:
            ...  # refuse: 422, naming verdict.found ("password", "email", ...), never the text
        else:
            ...  # write verdict.text in verdict.scope (verdict.user_id for a user-scope item)
    """
    counts = counts if counts is not None else Screened()
    secret = guard.kind(text)
    if secret is not None:
        counts.secrets_dropped += 1
        counts._saw(secret)
        return WriteVerdict("dropped", None, None, found=secret)
    contact = contact_kind(text, [u for u in dict.fromkeys([*people, *([owner] if owner else [])]) if u]) \
        if scope == "agent" else None
    if contact is None:
        return WriteVerdict("kept", text, scope, user_id if scope == "user" else None)
    counts._saw(contact)
    if owner:
        counts.contacts_rescoped += 1
        return WriteVerdict("rescoped", text, "user", owner, found=contact)
    counts.contacts_dropped += 1
    return WriteVerdict("dropped", None, None, found=contact)


def screen_blob(
    text: str, scope: str, *, guard: SecretGuard, people: Iterable[str] = (), counts: Screened | None = None,
) -> str:
    """A consolidated blob as it may be stored: every line (a bullet, a header, a paragraph)
    that ``screen_write`` would not keep in ``scope`` is removed, the others are kept as
    written. A blob is shared by everyone its scope reaches, so a line with contact data in an
    agent blob cannot move anywhere: it is dropped (counted as ``contacts_dropped``)."""
    people = list(people)
    kept = [line for line in text.split("\n")
            if not line.strip() or not screen_write(line, scope, guard=guard, people=people, counts=counts).dropped]
    return "\n".join(kept)


def screen_excerpt(source: Provenance, guard: SecretGuard) -> tuple[Provenance, int]:
    """``source`` with every excerpt line that carries a secret blanked (the line stays, empty,
    so the excerpt still ends with the source message's line, which ``storable_line`` reads),
    and how many were. The run record keeps excerpts for provenance and for embedding an
    UPDATE's text; the messages themselves are kept as sent, but a run record is memory's
    derived copy and keeps no secret (design §11)."""
    lines = tuple("" if line and guard.kind(line) is not None else line for line in source.excerpt)
    blanked = sum(1 for before, after in zip(source.excerpt, lines) if before != after)
    return (source if not blanked else Provenance(source.message_id, lines, source.date)), blanked
