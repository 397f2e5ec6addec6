"""The agent's categories (design §13 "Categories and metadata"): the list extraction files
facts under, per agent, set by its owner. Pure functions over ``AgentSettings``.

An agent starts with ``DEFAULT_CATEGORIES``: mem0's default list (its platform docs, "Custom
Categories"), less ``user_preferences`` (preferences are reflections here, never facts) and
``misc`` (a fact may carry no category), plus ``projects`` and ``finance`` for the shared
memory of a team's agent (plans, budgets, invoices). Every change appends a version
(``schemas.owner.CategoryList``) naming who and when, like the Memory Instructions; the
current list is the newest version's.

A name is a short lower-case slug (``^[a-z][a-z0-9_]{0,39}$``) so that it reads the same in a
prompt, a URL query and a filter; a list holds at most ``MAX_CATEGORIES`` distinct names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from pipeline.errors import InvalidInput
from pipeline.prompts.facts import CATEGORY_PATTERN
from schemas.documents import AgentSettings
from schemas.owner import CategoryList

DEFAULT_CATEGORIES: tuple[str, ...] = (
    "personal_details", "family", "professional_details", "health", "travel", "food", "sports", "music",
    "technology", "hobbies", "fashion", "entertainment", "milestones", "projects", "finance",
)
MAX_CATEGORIES = 50
NAME = re.compile(CATEGORY_PATTERN)


def check_name(name: object, where: str) -> str:
    """``name`` if it is a category name, else ``InvalidInput`` saying what a name is."""
    if not isinstance(name, str) or not NAME.match(name):
        shown = repr(name)[:60]
        raise InvalidInput(where, f"{shown} is not a category name: lower-case letters, digits and _, "
                                  "starting with a letter, at most 40 characters")
    return name


def check_names(names: Sequence[object], where: str = "categories") -> list[str]:
    """The list as stored: each name checked, in order, without repeats, at most ``MAX_CATEGORIES``."""
    if len(names) > MAX_CATEGORIES:
        raise InvalidInput(where, f"has {len(names)} names; an agent has at most {MAX_CATEGORIES} categories")
    return list(dict.fromkeys(check_name(n, f"{where}[{i}]") for i, n in enumerate(names)))


def history(agent: AgentSettings) -> list[CategoryList]:
    """Every version of the agent's list, oldest first (empty: the defaults were never changed)."""
    return sorted(agent.categories, key=lambda c: c.version)


def current(agent: AgentSettings) -> list[str]:
    """The agent's categories now: its newest version's, the defaults before any."""
    versions = history(agent)
    return list(versions[-1].names) if versions else list(DEFAULT_CATEGORIES)


def _append(agent: AgentSettings, names: list[str], by: str, now: datetime,
            rolled_back_to: int | None = None) -> AgentSettings:
    versions = history(agent)
    version = CategoryList(version=(versions[-1].version if versions else 0) + 1, names=names, set_by=by,
                           set_at=now, rolled_back_to=rolled_back_to)
    return agent.model_copy(update={"categories": [*agent.categories, version], "updated_at": now})


def set_categories(agent: AgentSettings, names: Sequence[object], *, by: str, now: datetime,
                   where: str = "categories") -> AgentSettings:
    """The settings with a new version holding ``names`` (checked; [] leaves facts uncategorised).
    Facts already filed keep their categories: a list change files new facts only."""
    return _append(agent, check_names(names, where), by, now)


def rollback_categories(agent: AgentSettings, version: int, *, by: str, now: datetime) -> AgentSettings:
    """A new version carrying the list of an earlier ``version``."""
    found = next((c for c in history(agent) if c.version == version), None)
    if found is None:
        raise InvalidInput("version", f"no version {version} of the category list of agent {agent.agent_id!r}")
    return _append(agent, list(found.names), by, now, rolled_back_to=version)


def check_filed(names: Sequence[object], allowed: Sequence[str], where: str = "categories") -> list[str]:
    """The categories a person files a fact under: each a name of the agent's list (``allowed``),
    or ``InvalidInput`` naming the first that is not, and the list it must come from."""
    for i, name in enumerate(names):
        if name not in allowed:
            listed = ", ".join(allowed) if allowed else "(the agent has no categories)"
            raise InvalidInput(f"{where}[{i}]", f"{str(name)[:60]!r} is not one of the agent's categories: {listed}")
    return list(dict.fromkeys(str(n) for n in names))


def known(names: Iterable[str], allowed: Sequence[str]) -> list[str]:
    """``names`` that are in ``allowed``, in order, each once: what an answer's categories keep."""
    listed = set(allowed)
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n in listed))
