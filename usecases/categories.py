"""Read and change an agent's category list (design §13 "Categories and metadata"): the one
entry point of ``GET|PUT /v1/agents/{a}/categories``, ``memoryctl categories`` and Python.

    from usecases import categories
    categories.set_list(ingest, "juniper", ["projects", "finance", "venues"], by="me", now=now)
    categories.show(store.ingest, "juniper").names

A change's result names its audit entry (``audit``), which the door records under who asked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from pipeline.owner import categories as rules
from pipeline.store.ports.ingest import IngestStore
from schemas.documents import AgentSettings
from schemas.owner import CategoryList
from usecases.audit import Audited


@dataclass(frozen=True)
class Categories:
    """An agent's list now (``version`` 0: the defaults, never changed) and every version."""

    agent_id: str
    names: list[str]
    version: int
    history: list[CategoryList]
    action: str | None = None     # the change that made this version (``categories.set`` or ``.rollback``)

    @property
    def audit(self) -> Audited:
        return Audited(self.action or "categories.set", self.agent_id, "categories",
                       {"version": self.version, "names": len(self.names)})


def _view(agent: AgentSettings) -> Categories:
    versions = rules.history(agent)
    return Categories(agent.agent_id, rules.current(agent), versions[-1].version if versions else 0, versions)


def show(ingest: IngestStore, agent_id: str) -> Categories:
    return _view(ingest.get_agent_settings(agent_id))


def _change(ingest: IngestStore, agent_id: str, change: Callable[[AgentSettings], AgentSettings]) -> Categories:
    updated = change(ingest.get_agent_settings(agent_id))
    ingest.put_agent_settings(updated)
    return _view(updated)


def set_list(ingest: IngestStore, agent_id: str, names: Sequence[object], *, by: str, now: datetime,
             where: str = "categories") -> Categories:
    """A new version holding ``names``; ``InvalidInput`` naming the first bad name (``where[i]``)."""
    return replace(_change(ingest, agent_id, lambda a: rules.set_categories(a, names, by=by, now=now, where=where)),
                   action="categories.set")


def reset(ingest: IngestStore, agent_id: str, *, by: str, now: datetime) -> Categories:
    """A new version holding the default list."""
    return set_list(ingest, agent_id, rules.DEFAULT_CATEGORIES, by=by, now=now)


def rollback(ingest: IngestStore, agent_id: str, version: int, *, by: str, now: datetime) -> Categories:
    """A new version with the list of an earlier ``version``."""
    return replace(_change(ingest, agent_id, lambda a: rules.rollback_categories(a, version, by=by, now=now)),
                   action="categories.rollback")
