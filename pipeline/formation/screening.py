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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from pipeline.conversation import humans
from pipeline.formation.contacts import contact_kind
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
    return SecretGuard(settings.secret_patterns)


def _screen(
    items: Sequence[tuple[str, str]], scopes: Sequence[str], guard: SecretGuard, user_ids: Iterable[str],
    result: Screened,
) -> list[tuple[str, str]]:
    """(scope, text) pairs kept, in order, with agent items carrying contact data re-scoped."""
    ids = [u for u in dict.fromkeys(user_ids) if u]
    kept = []
    for scope, text in items:
        secret = guard.kind(text)
        if secret is not None:
            result.secrets_dropped += 1
            result._saw(secret)
            continue
        contact = contact_kind(text, ids) if scope == "agent" and "agent" in scopes else None
        if contact is None:
            kept.append((scope, text))
            continue
        result._saw(contact)
        if "user" in scopes:
            result.contacts_rescoped += 1
            kept.append(("user", text))
        else:
            result.contacts_dropped += 1
    return kept


def storable_line(line: str, scope: str, guard: SecretGuard, user_ids: Iterable[str]) -> str | None:
    """A source message line stored with a fact for its text search (``Fact.source_text``), if
    the fact's own text could carry it: none with a secret, and none with contact data for an
    agent-scope fact. The fact itself stays; it only loses the line."""
    if guard.kind(line) is not None:
        return None
    if scope == "agent" and contact_kind(line, [u for u in dict.fromkeys(user_ids) if u]) is not None:
        return None
    return line


def screen_facts(
    facts: Sequence[ExtractedFact], plan: ScopePlan, guard: SecretGuard, user_ids: Iterable[str],
) -> tuple[list[ExtractedFact], Screened]:
    """The facts of an extract_facts answer that may be stored, and what was screened out."""
    result = Screened()
    kept = _screen([(f.scope, f.text) for f in facts], plan.fact_scopes, guard, user_ids, result)
    return [ExtractedFact(scope=scope, text=text) for scope, text in kept], result


def screen_reflections(
    answer: ReflectionsAnswer, plan: ScopePlan, guard: SecretGuard, user_ids: Iterable[str],
) -> tuple[ReflectionsAnswer, Screened]:
    """The reflections of an answer that may be stored; a re-scoped agent reflection joins the
    end of the user level, where the hierarchy filter then treats it like any user reflection."""
    result = Screened()
    by_level: dict[str, list] = {"agent": [], "user": [], "session": []}
    for level in ("agent", "user", "session"):
        for item in getattr(answer, level):  # one at a time: a kept item keeps its cited sources
            for scope, _ in _screen([(level, item.text)], plan.reflection_scopes, guard, user_ids, result):
                by_level[scope].append(item)
    return ReflectionsAnswer(**by_level), result
