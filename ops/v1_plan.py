"""The pure half of the migration from the previous memory system (design §9, §11): the three
source collections, already read, mapped to the new documents (``plan_migration``), before
anything is written. ``ops.migrate_v1`` reads the source and writes the plan.

Mapping, per source document:
- ``memory_sessions`` ``directive`` -> a user reflection for each of its ``related_users``;
  ``suggestion`` -> an agent reflection. Each is unabsorbed only if its id is listed in its
  parent's ``unabsorbed_memory_ids`` (``memory_user`` of that agent and user for directives,
  ``memory_agent`` shards of that agent for suggestions); otherwise it is migrated absorbed.
- ``fact`` -> an agent fact, embedded; the ``facts`` of active ``memory_agent`` shards too.
- ``episode`` -> dropped.
- ``memory_user.content`` -> the user's consolidated blob.
- the ``content`` of active ``memory_agent`` shards, as ``[SHARD NAME]`` sections under
  ``VERSION: 1`` -> the agent's consolidated blob.

Guarantees (every write path screens, ``pipeline.formation.screening.screen_write``):
- Screening: a record that carries a secret is not migrated; a blob loses the sentence or
  bullet that carries one. An agent-scope record (fact, suggestion, shard line) with contact
  data (an email address, a phone number, a v1 user id of that agent) moves to the user scope
  of its one related user (the one user id a shard line names), as a user fact or an
  unabsorbed user reflection; with none or several, or with the agent's user memory off in the
  target store, it is dropped. Counted.
- Provenance: ``source_user_ids`` are the record's ``related_users`` (a user blob's and its
  reflections': ``memory_user.user_id``), ``source_message_ids`` and ``source_session_id``
  are copied; ``forget-user`` then finds what rests on a v1 user. Shard text names no user:
  it carries none and ``forget-user`` counts it as unattributed.
- Word limits: a blob over its scope's limit keeps whole units up to it (``ops.v1_blobs.fit``)
  and the rest become unabsorbed reflections of the same scope, which the next consolidation
  merges through the model within the limit. Each blob's text also becomes absorbed
  reflections (``v1:<_id>``, or ``v1:<_id>:<n>`` when it takes several) that the blob names in
  ``absorbing_ids``: a blob rebuilt after an erasure is merged from them, so a rebuild keeps
  the migrated memory. Every item is within its own limit (a fact ``fact_word_limit``, a
  reflection ``reflection_word_limit``): a longer one is cut at sentence boundaries into
  several (``:p<n>`` after its id), and a sentence over the limit alone is refused and
  counted (``skipped: sentences over the N-word fact|reflection limit``), never stored.
- Absorbed: a directive or suggestion is migrated absorbed only when its parent lists it as
  absorbed and this migration writes that parent's blob; otherwise it waits unabsorbed in the
  scope's buffer (a directive of a user with no ``memory_user`` text lands in that user's).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ops import v1_blobs
from pipeline.formation.screening import Screened, guard_for, screen_write
from pipeline.formation.secrets import SecretGuard
from pipeline.text import text_hash
from schemas.documents import ConsolidatedBlob, Fact, Reflection, scope_key
from schemas.settings import Settings


@dataclass
class MigrationPlan:
    """Everything the source maps to, before anything is written."""

    user_reflections: list[Reflection] = field(default_factory=list)    # directives
    agent_reflections: list[Reflection] = field(default_factory=list)   # suggestions
    moved_reflections: list[Reflection] = field(default_factory=list)   # agent records with contact data
    blob_reflections: list[Reflection] = field(default_factory=list)    # each blob's text, absorbed
    overflow_reflections: list[Reflection] = field(default_factory=list)  # blob units over the limit
    facts: list[Fact] = field(default_factory=list)
    user_blobs: list[ConsolidatedBlob] = field(default_factory=list)
    agent_blobs: list[ConsolidatedBlob] = field(default_factory=list)
    episodes_dropped: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    screened: Screened = field(default_factory=Screened)

    def size(self) -> int:
        """Documents ``apply_plan`` writes (or finds already written)."""
        return len(self.facts) + len(self.reflections()) + len(self.user_blobs) + len(self.agent_blobs)

    def reflections(self) -> list[Reflection]:
        return [*self.user_reflections, *self.agent_reflections, *self.moved_reflections,
                *self.blob_reflections, *self.overflow_reflections]

    def counts(self) -> dict[str, int]:
        items = [*self.facts, *self.reflections()]
        return {
            "directives -> user reflections": len(self.user_reflections),
            "directives -> user reflections, unabsorbed": sum(not r.absorbed for r in self.user_reflections),
            "suggestions -> agent reflections": len(self.agent_reflections),
            "suggestions -> agent reflections, unabsorbed": sum(not r.absorbed for r in self.agent_reflections),
            "facts -> agent facts": sum(f.scope == "agent" for f in self.facts),
            "facts with contact data -> user facts": sum(f.scope == "user" for f in self.facts),
            "agent texts with contact data -> user reflections": len(self.moved_reflections),
            "memory_user -> user blobs": len(self.user_blobs),
            "memory_agent shards -> agent blobs": len(self.agent_blobs),
            "blob texts -> absorbed reflections": len(self.blob_reflections),
            "blob text over its limit -> unabsorbed reflections": len(self.overflow_reflections),
            "episodes -> dropped": self.episodes_dropped,
            "secrets -> dropped": self.screened.secrets_dropped,
            "contact data in agent scope -> dropped": self.screened.contacts_dropped,
            "unattributed (no v1 user id)": sum(not i.source_user_ids for i in items),
            **{f"skipped: {reason}": n for reason, n in sorted(self.skipped.items())},
        }


def _id(doc: Mapping[str, Any]) -> str:
    return str(doc["_id"])


def _formed_at(doc: Mapping[str, Any], now: datetime) -> datetime:
    for key in ("created_at", "createdAt", "updated_at"):
        value = doc.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    generation_time = getattr(doc.get("_id"), "generation_time", None)  # bson ObjectId
    return generation_time if isinstance(generation_time, datetime) else now


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _ids(values: Any) -> list[str]:
    return [str(v) for v in dict.fromkeys(values or []) if v]


def _shard_fact_texts(shard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, text) of each fact a shard carries: plain strings or {content|text|fact} documents."""
    for i, item in enumerate(shard.get("facts") or []):
        if isinstance(item, Mapping):
            text = _text(item.get("content") or item.get("text") or item.get("fact"))
            key = str(item.get("_id") or item.get("id") or i)
        else:
            text, key = _text(item), str(i)
        if text:
            yield key, text


class _Planner:
    """One pass over the source; every record through ``screen_write`` before it is planned."""

    def __init__(self, users: list, agents: list, sessions: list, settings: Settings, now: datetime,
                 user_memory: Callable[[str], bool]) -> None:
        self.plan, self.settings, self.now, self.user_memory = MigrationPlan(), settings, now, user_memory
        self.guard: SecretGuard = guard_for(settings)
        # every v1 user id of an agent: agent-scope text must not carry one (design §11)
        self.people: dict[str, set[str]] = defaultdict(set)
        for doc in users:
            self.people[str(doc.get("agent_id"))].add(str(doc.get("user_id") or ""))
        for doc in sessions:
            self.people[str(doc.get("agent_id"))].update(_ids(doc.get("related_users")))

    def screen(self, text: str, scope: str, agent_id: str, related: list[str]):
        """``screen_write`` with the record's one related user as the owner of contact data
        (none when the agent's user memory is off: then it is dropped, as in formation)."""
        owner = related[0] if len(related) == 1 and self.user_memory(agent_id) else None
        return screen_write(text, scope, guard=self.guard, people=sorted(self.people[agent_id] - {""}),
                            owner=owner, counts=self.plan.screened)

    def within_limit(self, text: str, kind: str) -> list[str]:
        """``text`` as items within the word limit of ``kind`` (``fact``, ``reflection``): cut
        at sentence boundaries; a sentence over the limit alone is refused and counted."""
        limit = self.settings.fact_word_limit if kind == "fact" else self.settings.reflection_word_limit
        items, refused = v1_blobs.within_limit([text], limit)
        if refused:
            self.plan.skipped[f"sentences over the {limit}-word {kind} limit"] += len(refused)
        return items

    def section_items(self, section: v1_blobs.Section, *, header: bool) -> list[str]:
        """A blob section's text as reflections within the limit, each under the section's
        header when ``header`` (what a rebuild merges the blob from: each says where it stood)."""
        prefix = f"{section.header}\n" if header and section.header else ""
        limit = self.settings.reflection_word_limit - len(prefix.split())
        items, refused = v1_blobs.within_limit([u for line in section.lines for u in line], limit)
        if refused:
            self.plan.skipped[f"sentences over the {self.settings.reflection_word_limit}-word reflection limit"] += \
                len(refused)
        return [prefix + item for item in items]

    def named_users(self, text: str, agent_id: str) -> list[str]:
        """The v1 user ids of the agent that ``text`` names (as ``contacts`` looks for them)."""
        from pipeline.formation.contacts import contact_kind

        return [u for u in sorted(self.people[agent_id] - {""}) if contact_kind(text, [u]) == "user_id"]

    def reflection(self, rid: str, agent_id: str, scope: str, user_id: str | None, text: str, *,
                   related: list[str], absorbed: bool, formed_at: datetime, session_id: str | None = None,
                   message_ids: Iterable[str] = ()) -> Reflection:
        return Reflection(
            reflection_id=rid, agent_id=agent_id, scope=scope, user_id=user_id,
            scope_key=scope_key("user", user_id=user_id) if scope == "user" else "agent", content=text,
            source_session_id=session_id, source_message_ids=list(message_ids), source_user_ids=related,
            formed_at=formed_at, absorbed=absorbed, absorbed_at=self.now if absorbed else None,
            consolidated_into=1 if absorbed else None,
        )

    def blob(self, origins: list[str], agent_id: str, scope: str, user_id: str | None,
             sections: list[v1_blobs.Section], original: str, *, formed_at: datetime, related: list[str],
             version: int | None) -> None:
        """A v1 blob within its limit; the text of each source document (``origins[i]``: the v1
        ``_id`` section ``i`` came from) as an absorbed reflection, the units over the limit
        unabsorbed."""
        limit = self.settings.word_limit(scope)  # type: ignore[arg-type]
        over = v1_blobs.fit(sections, limit, version=version)
        text = v1_blobs.render(sections, version=version)
        if not over and " ".join(text.split()) == " ".join(original.split()):
            text = original   # screened and fitted, nothing lost: kept as written
        own = []
        for origin in dict.fromkeys(origins):
            # a user blob's own headers stay with its text; a shard's is the shard's name
            items = [item for s, o in zip(sections, origins) if o == origin
                     for item in self.section_items(s, header=version is None)]
            for n, item in enumerate(items):
                own.append(f"v1:{origin}" if len(items) == 1 else f"v1:{origin}:{n}")
                self.plan.blob_reflections.append(self.reflection(
                    own[-1], agent_id, scope, user_id, item, related=related, absorbed=True, formed_at=formed_at))
        overflow = [(i, item) for i, unit in over for item in self.within_limit(unit, "reflection")]
        for n, (i, item) in enumerate(overflow):
            self.plan.overflow_reflections.append(self.reflection(
                f"v1:{origins[i]}:over:{n}", agent_id, scope, user_id, item, related=related, absorbed=False,
                formed_at=formed_at))
        blobs = self.plan.user_blobs if scope == "user" else self.plan.agent_blobs
        blobs.append(ConsolidatedBlob(
            agent_id=agent_id, scope=scope, scope_key=scope_key("user", user_id=user_id) if scope == "user" else "agent",
            user_id=user_id, consolidated_content=text, word_limit=limit, version=1, last_consolidated_at=formed_at,
            absorbing_ids=own,
        ))


def plan_migration(
    sessions: Iterable[Mapping[str, Any]],
    users: Iterable[Mapping[str, Any]],
    agents: Iterable[Mapping[str, Any]],
    settings: Settings,
    now: datetime,
    user_memory: Callable[[str], bool] = lambda agent_id: True,
) -> MigrationPlan:
    """Pure mapping of the three source collections (already read) to the new documents.
    ``user_memory(agent_id)``: whether the agent forms user memory (the target store's toggle),
    which decides whether contact data can move to a user's scope."""
    sessions, users = list(sessions), list(users)
    agents = sorted(agents, key=lambda d: (str(d.get("agent_id")), _id(d)))
    planner = _Planner(users, agents, sessions, settings, now, user_memory)
    absorbed = _Absorbed.of(users, agents)
    for doc in sessions:
        _plan_session_record(planner, absorbed, doc)
    for doc in users:
        _plan_user_blob(planner, doc)
    _plan_agent_shards(planner, agents)
    return planner.plan


@dataclass
class _Absorbed:
    """What the parents list as unabsorbed, and which parents' blobs this migration writes."""

    user_unabsorbed: dict[tuple[str, str], set[str]]
    agent_unabsorbed: dict[str, set[str]]
    user_blobs: set[tuple[str, str]]
    agent_blobs: set[str]

    @classmethod
    def of(cls, users: list, agents: list) -> _Absorbed:
        user_unabsorbed: dict[tuple[str, str], set[str]] = defaultdict(set)
        for doc in users:
            user_unabsorbed[(str(doc.get("agent_id")), str(doc.get("user_id")))].update(
                str(x) for x in doc.get("unabsorbed_memory_ids") or []
            )
        agent_unabsorbed: dict[str, set[str]] = defaultdict(set)
        for doc in agents:
            agent_unabsorbed[str(doc.get("agent_id"))].update(str(x) for x in doc.get("unabsorbed_memory_ids") or [])
        # a record counts as absorbed only into a blob this migration writes: a directive whose
        # user has no memory_user text (or a suggestion of an agent with no active shard text)
        # waits unabsorbed in that scope's buffer, and the next consolidation builds the blob
        user_blobs = {(str(d.get("agent_id")), str(d.get("user_id"))) for d in users
                      if _text(d.get("content")) and d.get("agent_id") and d.get("user_id")}
        agent_blobs = {str(d.get("agent_id")) for d in agents if d.get("is_active") and _text(d.get("content"))}
        return cls(user_unabsorbed, agent_unabsorbed, user_blobs, agent_blobs)

    def user(self, agent_id: str, user_id: str, old_id: str) -> bool:
        return (agent_id, user_id) in self.user_blobs and old_id not in self.user_unabsorbed[(agent_id, user_id)]

    def agent(self, agent_id: str, old_id: str) -> bool:
        return agent_id in self.agent_blobs and old_id not in self.agent_unabsorbed[agent_id]


def _plan_session_record(planner: _Planner, absorbed: _Absorbed, doc: Mapping[str, Any]) -> None:
    """One ``memory_sessions`` record: skipped and counted, dropped by screening, or planned as
    facts or reflections within their word limit."""
    plan, now = planner.plan, planner.now
    kind, text, agent_id = doc.get("memory_type"), _text(doc.get("content")), doc.get("agent_id")
    if kind == "episode":
        plan.episodes_dropped += 1
        return
    if not agent_id or not text:
        plan.skipped["no agent_id or empty content"] += 1
        return
    if kind not in ("directive", "suggestion", "fact"):
        plan.skipped[f"unknown memory_type {kind!r}"] += 1
        return
    agent_id, old_id = str(agent_id), _id(doc)
    related = _ids(doc.get("related_users"))
    if kind == "directive" and not related:
        plan.skipped["directives without related_users"] += 1
        return
    verdict = planner.screen(text, "user" if kind == "directive" else "agent", agent_id, related)
    if verdict.dropped:
        return
    common = {"related": related, "formed_at": _formed_at(doc, now),
              "session_id": str(doc["source_session_id"]) if doc.get("source_session_id") else None,
              "message_ids": _ids(doc.get("source_message_ids"))}
    items = planner.within_limit(text, "fact" if kind == "fact" else "reflection")
    for n, item in enumerate(items):
        _plan_session_item(planner, absorbed, kind, agent_id, old_id, "" if len(items) == 1 else f":p{n}",
                           item, verdict, common)


def _plan_session_item(planner: _Planner, absorbed: _Absorbed, kind: str, agent_id: str, old_id: str, part: str,
                       item: str, verdict, common: dict) -> None:
    """One item (within its limit) of a screened record, in the scope its kind and verdict say."""
    plan, related = planner.plan, common["related"]
    if kind == "directive":
        for user_id in related:
            rid = f"v1:{old_id}{part}" if len(related) == 1 else f"v1:{old_id}:{user_id}{part}"
            plan.user_reflections.append(planner.reflection(
                rid, agent_id, "user", user_id, item, absorbed=absorbed.user(agent_id, user_id, old_id), **common))
    elif kind == "suggestion" and verdict.scope == "user":
        # never absorbed into the owner's user blob: the next consolidation merges it
        plan.moved_reflections.append(planner.reflection(f"v1:{old_id}{part}", agent_id, "user",
                                                         verdict.user_id, item, absorbed=False, **common))
    elif kind == "suggestion":
        plan.agent_reflections.append(planner.reflection(f"v1:{old_id}{part}", agent_id, "agent", None, item,
                                                         absorbed=absorbed.agent(agent_id, old_id), **common))
    else:
        plan.facts.append(_fact(f"v1:{old_id}{part}", agent_id, item, common["formed_at"], common["session_id"],
                                common["message_ids"], related, user_id=verdict.user_id))


def _plan_user_blob(planner: _Planner, doc: Mapping[str, Any]) -> None:
    """A ``memory_user`` text -> its user's blob, screened section by section."""
    text, agent_id, user_id = _text(doc.get("content")), doc.get("agent_id"), doc.get("user_id")
    if not (text and agent_id and user_id):
        planner.plan.skipped["memory_user without content, agent_id or user_id"] += 1
        return
    agent_id, user_id = str(agent_id), str(user_id)
    sections = v1_blobs.read_sections(text)
    v1_blobs.screen(sections, lambda unit: not planner.screen(unit, "user", agent_id, [user_id]).dropped)
    planner.blob([_id(doc)] * len(sections), agent_id, "user", user_id, sections, text,
                 formed_at=_formed_at(doc, planner.now), related=[user_id], version=None)


def _plan_agent_shards(planner: _Planner, agents: list) -> None:
    """Active ``memory_agent`` shards -> one agent blob per agent (a section per shard) and the
    shards' facts."""
    plan, now = planner.plan, planner.now
    shards: dict[str, list[tuple[Mapping[str, Any], v1_blobs.Section]]] = defaultdict(list)
    for shard in agents:
        agent_id = str(shard.get("agent_id"))
        if not shard.get("is_active"):
            plan.skipped["inactive memory_agent shards"] += 1
            continue
        text = _text(shard.get("content"))
        if text:
            section = v1_blobs.Section(f"[{shard.get('shard_name') or 'GENERAL'}]",
                                       [units for line in text.splitlines() if (units := v1_blobs.units_of(line))])
            v1_blobs.screen([section], lambda unit, a=agent_id, s=shard: _keep_shard_text(planner, a, s, unit))
            shards[agent_id].append((shard, section))
        _plan_shard_facts(planner, agent_id, shard)
    for agent_id, parts in shards.items():
        original = "VERSION: 1\n\n" + "\n\n".join(f"[{s.get('shard_name') or 'GENERAL'}]\n{_text(s.get('content'))}"
                                                   for s, _ in parts)
        planner.blob([_id(shard) for shard, _ in parts], agent_id, "agent", None, [section for _, section in parts], original,
                     formed_at=now, related=[], version=1)


def _plan_shard_facts(planner: _Planner, agent_id: str, shard: Mapping[str, Any]) -> None:
    for key, fact_text in _shard_fact_texts(shard):
        named = planner.named_users(fact_text, agent_id)
        verdict = planner.screen(fact_text, "agent", agent_id, named)
        items = [] if verdict.dropped else planner.within_limit(fact_text, "fact")
        for n, item in enumerate(items):
            planner.plan.facts.append(_fact(
                f"v1:{_id(shard)}:{key}" + ("" if len(items) == 1 else f":p{n}"), agent_id, item,
                _formed_at(shard, planner.now), None, [], named if verdict.scope == "user" else [],
                user_id=verdict.user_id))


def _keep_shard_text(planner: _Planner, agent_id: str, shard: Mapping[str, Any], unit: str) -> bool:
    """A shard sentence stays in the agent blob unless it carries a secret or contact data; one
    with contact data that names exactly one v1 user moves to that user's scope."""
    named = planner.named_users(unit, agent_id)
    verdict = planner.screen(unit, "agent", agent_id, named)
    for item in planner.within_limit(unit, "reflection") if verdict.scope == "user" else ():
        n = len(planner.plan.moved_reflections)
        planner.plan.moved_reflections.append(planner.reflection(
            f"v1:{_id(shard)}:moved:{n}", agent_id, "user", verdict.user_id, item, related=named, absorbed=False,
            formed_at=_formed_at(shard, planner.now)))
    return verdict.scope == "agent"


def _fact(fact_id, agent_id, text, formed_at, session_id, message_ids, related, *, user_id=None) -> Fact:
    """An agent fact, or (contact data of its one related user) that user's fact."""
    scope = "user" if user_id else "agent"
    return Fact(
        fact_id=fact_id, agent_id=agent_id, scope=scope, user_id=user_id,
        scope_key=scope_key("user", user_id=user_id) if user_id else "agent", content=text,
        hash=text_hash(text), source_session_id=session_id, source_message_ids=list(message_ids),
        source_user_ids=list(related), formed_at=formed_at,
    )
