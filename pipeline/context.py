"""What a conversation may see, the memory-context XML, and when a cached context is stale
(design §1, §6). Pure: the service reads the store and hands plain data in.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from xml.sax.saxutils import escape

from schemas.context import ContextBlock, ContextFact, ContextSection, Omitted
from schemas.documents import AgentSettings, CachedContext, scope_key
from schemas.settings import Settings

#: key of the visibility fingerprint inside ``CachedContext.versions`` (no scope key has "~")
VIEW_KEY = "~view"
#: key of the token budget inside ``CachedContext.versions``
BUDGET_KEY = "~budget"
_SECTION = {"agent": "AgentMemory", "user": "UserMemory", "session": "SessionMemory"}
#: at most this many buffered reflections per scope are shown (the newest)
MAX_RECENT_REFLECTIONS = 20


@dataclass(frozen=True)
class Visibility:
    """The scopes one (agent, session, user) may see, after toggles and the group-chat rule."""

    group_chat: bool
    #: memory sections shown in the context, in order (agent, user, session)
    context_scope_keys: tuple[str, ...]
    #: fact scopes visible here (FIFO and search_facts): agent and/or this user
    fact_scope_keys: tuple[str, ...]
    show_facts: bool
    search_offered: bool

    def fingerprint(self) -> int:
        """Changes whenever what the context may show changes (toggles, group chat)."""
        return zlib.crc32(repr((self.context_scope_keys, self.fact_scope_keys, self.show_facts)).encode())


def is_group_chat(session_users: Iterable[str], user_id: str | None) -> bool:
    """More than one human: the stored session users plus the asking user."""
    humans = {u for u in session_users if u}
    if user_id:
        humans.add(user_id)
    return len(humans) > 1


def visibility(
    settings: Settings, agent: AgentSettings, *, session_id: str, user_id: str | None,
    session_users: Iterable[str], user_memory_on: bool = True,
) -> Visibility:
    """Apply §1: agent/user toggles, the group-chat rule, and the global toggles; and §12: a
    user who switched their own memory off with this agent (``user_memory_on`` False) sees no
    user scope, in the context and in search alike."""
    group = is_group_chat(session_users, user_id)
    facts: list[str] = []
    if agent.agent_memory_enabled:
        facts.append(scope_key("agent"))
    if agent.user_memory_enabled and user_memory_on and user_id and not group:
        facts.append(scope_key("user", user_id=user_id))
    shown: tuple[str, ...] = ()
    if settings.always_in_context:
        shown = (*facts, scope_key("session", session_id=session_id))
    return Visibility(
        group_chat=group,
        context_scope_keys=shown,
        fact_scope_keys=tuple(facts),
        show_facts=settings.always_in_context and settings.facts_fifo and bool(facts),
        search_offered=settings.rag and (agent.agent_memory_enabled or agent.user_memory_enabled),
    )


# --------------------------------------------------------------------------- rendering ------
@dataclass(frozen=True)
class ScopeMemory:
    scope_key: str
    consolidated: str
    reflections: Sequence[str]


@dataclass(frozen=True)
class FactLine:
    scope: str
    content: str
    changed_at: datetime     # the latest change of the fact (formed, or updated since)


def format_age(changed_at: datetime, now: datetime) -> str:
    """``12m ago``, ``5h ago``, ``3d ago`` (floored; a future time counts as now)."""
    seconds = max(0, int((now - changed_at).total_seconds()))
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def shape_context(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], now: datetime, omitted: Omitted = Omitted(),
    relevant: Sequence[FactLine] = (),
) -> ContextBlock:
    """The context as shown: a scope with nothing to show is left out, a blob is stripped, a
    reflection or a fact is put on one line and a fact aged at ``now``. ``relevant``: the
    facts a search for the current message found, best first."""
    sections: dict[str, ContextSection] = {}
    for memory in scopes:
        reflections = [_one_line(r) for r in memory.reflections if r.strip()]
        if memory.consolidated.strip() or reflections:
            sections[memory.scope_key.split(":", 1)[0]] = ContextSection(
                consolidated=memory.consolidated.strip() or None, recent_reflections=reflections)

    def shown(lines: Sequence[FactLine]) -> list[ContextFact]:
        return [ContextFact(scope=f.scope, text=_one_line(f.content), age=format_age(f.changed_at, now)) for f in lines]

    return ContextBlock(sections=sections, relevant_facts=shown(relevant), facts=shown(facts), omitted=omitted)


def render_xml(block: ContextBlock) -> str:
    """The ``<MemoryContext>`` block the agent reads; "" when nothing shows and nothing was
    omitted. The line saying what a budget left out comes last."""
    parts: list[str] = []
    for kind, section in block.sections.items():
        inner: list[str] = []
        if section.consolidated:
            inner.append(f"    <Consolidated>{escape(section.consolidated)}</Consolidated>")
        if section.recent_reflections:
            lines = "\n".join(f"    - {escape(r)}" for r in section.recent_reflections)
            inner.append(f"    <RecentReflections>\n{lines}\n    </RecentReflections>")
        parts.append(f"  <{_SECTION[kind]}>\n" + "\n".join(inner) + f"\n  </{_SECTION[kind]}>")
    for tag, shown in (("RelevantFacts", block.relevant_facts), ("Facts", block.facts)):
        if shown:
            lines = "\n".join(f"  - [{escape(f.scope)}] {escape(f.text)} ({f.age})" for f in shown)
            parts.append(f"  <{tag}>\n{lines}\n  </{tag}>")
    if block.omitted:
        parts.append(_omitted_line(block.omitted))
    if not parts:
        return ""
    return "<MemoryContext>\n" + "\n".join(parts) + "\n</MemoryContext>"


def _omitted_line(omitted: Omitted) -> str:
    """``<Omitted sections="2" facts="12"/>`` (a kind with nothing left out is not named)."""
    counts = (("blobs", omitted.blobs), ("sections", omitted.sections), ("reflections", omitted.reflections),
              ("relevant_facts", omitted.relevant), ("facts", omitted.facts))
    attrs = " ".join(f'{name}="{count}"' for name, count in counts if count)
    return f"  <Omitted {attrs}/>"


def render_context(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], now: datetime, omitted: Omitted = Omitted(),
    relevant: Sequence[FactLine] = (),
) -> str:
    """``render_xml`` of ``shape_context``: the ``<MemoryContext>`` block of these memories."""
    return render_xml(shape_context(scopes, facts, now, omitted, relevant))


def fifo_since(settings: Settings, now: datetime) -> datetime:
    """The oldest latest change (``updated_at``) the <Facts> section shows."""
    return now - timedelta(days=settings.facts_fifo_max_age_days)


# --------------------------------------------------------------------------- cache ----------
def cache_versions(view: Visibility, stamps: Mapping[str, int], max_tokens: int) -> dict[str, int]:
    """What a cached context is valid for: the stamps of the scopes it shows, the view and
    the token budget it was packed for."""
    keys = set(view.context_scope_keys) | set(view.fact_scope_keys)
    versions = {key: int(stamps.get(key, 0)) for key in sorted(keys)}
    versions[VIEW_KEY] = view.fingerprint()
    versions[BUDGET_KEY] = max_tokens
    return versions


def is_fresh(cached: CachedContext | None, versions: Mapping[str, int], now: datetime, ttl_s: float) -> bool:
    """A cached context serves only within its TTL and while no stamp it depends on moved."""
    if cached is None:
        return False
    age = (now - cached.built_at).total_seconds()
    return 0 <= age < ttl_s and dict(cached.versions) == dict(versions)
