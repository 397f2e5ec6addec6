"""What a search or a context is narrowed to (design §13 "Categories and metadata"): the facts
filed under any of some categories, and holding, for each metadata key named, one of the
values given (mem0's simple filters: any of a list, every key).

A filter is checked against its agent before anything is read: a category must be one the
agent's list names or named once (facts keep the categories they were filed under when the
list changes), a key one the owner marks filterable (``AgentSettings.metadata_keys``). Anything
else is ``InvalidInput`` naming it, so that a misspelt filter is never read as "no memory".

Each store matches a filter on a fact's labels (``schemas.metadata.labels``) inside its search,
never after it: a filter's group of labels is "any of", the groups are "all of".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.errors import InvalidInput
from pipeline.owner import categories as filing
from schemas.documents import AgentSettings
from schemas.metadata import MAX_VALUES, category_label, metadata_label, value_problem, values_of


@dataclass(frozen=True)
class MemoryFilter:
    """Categories (any of) and metadata values per key (any of each; every key)."""

    categories: tuple[str, ...] = ()
    metadata: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.categories or self.metadata)

    def groups(self) -> list[list[str]]:
        """The label groups a fact must each hold a label of."""
        out = [[category_label(c) for c in self.categories]] if self.categories else []
        out += [[metadata_label(key, v) for v in values] for key, values in self.metadata]
        return out

    def matches(self, labels: Iterable[str]) -> bool:
        held = set(labels)
        return all(held.intersection(group) for group in self.groups())

    def describe(self) -> dict[str, Any]:
        """The filter as a caller wrote it (the debug answer, a trace)."""
        return {"categories": list(self.categories),
                "metadata": {k: (v[0] if len(v) == 1 else list(v)) for k, v in self.metadata}}


def named_categories(agent: AgentSettings) -> list[str]:
    """Every category a fact of the agent may be filed under: the defaults (the list before any
    change) and every version's names."""
    names = dict.fromkeys(filing.DEFAULT_CATEGORIES)
    for version in filing.history(agent):
        names.update(dict.fromkeys(version.names))
    return list(names)


def check_filter(
    agent: AgentSettings, categories: Sequence[object] | None = None, metadata: Mapping[str, object] | None = None,
    *, categories_where: str = "categories", metadata_where: str = "metadata",
) -> MemoryFilter:
    """The filter of ``categories`` and ``metadata`` as given by a caller, checked against
    ``agent``; ``InvalidInput`` naming the first bad part (``categories[1]``, ``metadata.tier``)."""
    return MemoryFilter(_checked_categories(agent, categories or (), categories_where),
                        _checked_metadata(agent, metadata or {}, metadata_where))


def _checked_categories(agent: AgentSettings, given: Sequence[object], where: str) -> tuple[str, ...]:
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise InvalidInput(where, "expected a list of category names")
    if len(given) > filing.MAX_CATEGORIES:
        raise InvalidInput(where, f"has {len(given)} names; a filter names at most {filing.MAX_CATEGORIES}")
    known = named_categories(agent)
    for i, name in enumerate(given):
        filing.check_name(name, f"{where}[{i}]")
        if name not in known:
            raise InvalidInput(f"{where}[{i}]", f"{name!r} is not a category of agent {agent.agent_id!r}: "
                                                f"{', '.join(known) or '(none)'}")
    return tuple(dict.fromkeys(str(n) for n in given))


def _checked_metadata(agent: AgentSettings, given: Mapping[str, object], where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(given, Mapping):
        raise InvalidInput(where, "expected an object of metadata keys and the values to match")
    keys = list(agent.metadata_keys)
    out = []
    for key, held in given.items():
        at = f"{where}.{key}"
        if key not in keys:
            marked = ", ".join(keys) if keys else "(none: the owner marks keys with `memoryctl metadata-keys set`)"
            raise InvalidInput(at, f"{str(key)[:64]!r} is not a filterable metadata key of agent "
                                   f"{agent.agent_id!r}; its filterable keys: {marked}")
        values = values_of(held)
        if not values or len(values) > MAX_VALUES:
            raise InvalidInput(at, f"expected a value or a list of 1 to {MAX_VALUES} values, got {len(values)}")
        for i, value in enumerate(values):
            problem = value_problem(value)
            if problem:
                raise InvalidInput(f"{at}[{i}]" if isinstance(held, list) else at, problem)
        # True == 1 in Python: a value's type is part of what it is
        out.append((str(key), tuple({(type(v), v): v for v in values}.values())))
    return tuple(out)
