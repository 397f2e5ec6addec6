"""What a conversation may see, the memory-context XML, and when a cached context is stale
(design §1, §6). Pure: the service reads the store and hands plain data in.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from xml.sax.saxutils import escape

from schemas.documents import AgentSettings, CachedContext, scope_key
from schemas.settings import Settings

#: key of the visibility fingerprint inside ``CachedContext.versions`` (no scope key has "~")
VIEW_KEY = "~view"
#: key of the token budget inside ``CachedContext.versions``
BUDGET_KEY = "~budget"
_SECTION = {"agent": "AgentMemory", "user": "UserMemory", "session": "SessionMemory"}


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


@dataclass(frozen=True)
class Omitted:
    """What a token budget left out of the context, by kind."""

    blobs: int = 0
    reflections: int = 0
    facts: int = 0
    relevant: int = 0

    def __bool__(self) -> bool:
        return bool(self.blobs or self.reflections or self.facts or self.relevant)

    def render(self) -> str:
        """``<Omitted facts="12" reflections="3"/>`` (a kind with nothing left out is not named)."""
        counts = (("blobs", self.blobs), ("relevant_facts", self.relevant), ("reflections", self.reflections),
                  ("facts", self.facts))
        attrs = " ".join(f'{name}="{count}"' for name, count in counts if count)
        return f"  <Omitted {attrs}/>"


def render_context(
    scopes: Sequence[ScopeMemory], facts: Sequence[FactLine], now: datetime, omitted: Omitted = Omitted(),
    relevant: Sequence[FactLine] = (),
) -> str:
    """The ``<MemoryContext>`` block; empty sections are left out, and "" when all are (and
    nothing was omitted). ``omitted`` adds the line saying what a budget left out.
    ``relevant``: the facts a search for the current message found, best first, in their own
    ``<RelevantFacts>`` section before ``<Facts>``."""
    parts: list[str] = []
    for memory in scopes:
        inner: list[str] = []
        if memory.consolidated.strip():
            inner.append(f"    <Consolidated>{escape(memory.consolidated.strip())}</Consolidated>")
        lines = [f"    - {escape(_one_line(r))}" for r in memory.reflections if r.strip()]
        if lines:
            inner.append("    <RecentReflections>\n" + "\n".join(lines) + "\n    </RecentReflections>")
        if inner:
            tag = _SECTION[memory.scope_key.split(":", 1)[0]]
            parts.append(f"  <{tag}>\n" + "\n".join(inner) + f"\n  </{tag}>")
    for tag, shown in (("RelevantFacts", relevant), ("Facts", facts)):
        if shown:
            lines = [
                f"  - [{escape(f.scope)}] {escape(_one_line(f.content))} ({format_age(f.changed_at, now)})"
                for f in shown
            ]
            parts.append(f"  <{tag}>\n" + "\n".join(lines) + f"\n  </{tag}>")
    if omitted:
        parts.append(omitted.render())
    if not parts:
        return ""
    return "<MemoryContext>\n" + "\n".join(parts) + "\n</MemoryContext>"


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
