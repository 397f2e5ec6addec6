"""Atlas search index management for ``memoryctl create-indexes`` (design §7).

Each index is created when missing, updated only when its ``latestDefinition`` (from
``list_search_indexes``) differs from the wanted one, and left alone otherwise: every update
makes mongot rebuild the whole index, so an unconditional update on each start would keep the
indexes rebuilding. After a create or an update the command waits, up to a bound, for the
index to be READY (queryable) and prints a progress line per poll; past the bound it says
that the index is still building (a new index answers nothing until then; an updated one
keeps serving its previous definition).

The comparison is "every wanted key has the wanted value": the server may fill in defaults
the request did not carry, which must not count as a difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.errors import ConfigurationError
from pipeline.search.atlas import Collections, search_index_definition, vector_index_definition

#: seconds between two status polls while waiting for READY
POLL_S = 2.0


@dataclass
class IndexOutcome:
    name: str          # collection.index
    action: str        # created, updated, unchanged
    status: str        # READY, BUILDING, PENDING, FAILED, ... as Atlas reports it
    queryable: bool
    waited_s: float = 0.0

    def describe(self) -> str:
        if self.status == "READY":
            return f"{self.name} ({self.action}, READY)"
        if self.status == "FAILED":
            return (f"{self.name} ({self.action}, FAILED: Atlas could not build it; its statusDetail in "
                    "list_search_indexes says why)")
        if self.queryable:
            return (f"{self.name} ({self.action}, still {self.status} after {self.waited_s:.0f} s: "
                    "queries use the previous definition until it is READY)")
        return (f"{self.name} ({self.action}, still {self.status} after {self.waited_s:.0f} s: "
                "not queryable yet, searches find nothing until it is READY)")


def covers(actual: Any, wanted: Any) -> bool:
    """``actual`` holds everything ``wanted`` says (extra keys in ``actual`` are defaults the
    server added); lists match element by element in any order."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(k in actual and covers(actual[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        if not isinstance(actual, list) or len(actual) != len(wanted):
            return False
        remaining = list(actual)
        for item in wanted:
            match = next((i for i, a in enumerate(remaining) if covers(a, item)), None)
            if match is None:
                return False
            remaining.pop(match)
        return True
    if isinstance(wanted, bool) or isinstance(actual, bool):
        return actual is wanted
    return actual == wanted


def wanted_indexes(dim: int) -> list[dict[str, Any]]:
    return [vector_index_definition(dim), search_index_definition()]


def ensure_search_indexes(
    facts, dim: int, *, wait_s: float, progress: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
) -> list[IndexOutcome]:
    """Create or update (only when changed) the vector and search indexes on ``facts``, then
    wait up to ``wait_s`` for every index touched to be READY."""
    from pymongo.operations import SearchIndexModel

    existing = {ix["name"]: ix for ix in facts.list_search_indexes()}
    actions: dict[str, str] = {}
    for spec in wanted_indexes(dim):
        name, held = spec["name"], existing.get(spec["name"])
        if held is None:
            facts.create_search_index(SearchIndexModel(definition=spec["definition"], name=name, type=spec["type"]))
            actions[name] = "created"
        elif held.get("type", spec["type"]) != spec["type"]:
            raise ConfigurationError(
                f"{facts.name}.{name} exists as a {held.get('type')!r} index, not {spec['type']!r}: drop it "
                "(db.collection.dropSearchIndex) and run create-indexes again")
        elif covers(held.get("latestDefinition"), spec["definition"]):
            actions[name] = "unchanged"
        else:
            facts.update_search_index(name, spec["definition"])
            actions[name] = "updated"
    return _wait(facts, actions, wait_s, progress, sleep, monotonic)


def _wait(facts, actions, wait_s, progress, sleep, monotonic) -> list[IndexOutcome]:
    start = monotonic()
    touched = {name for name, action in actions.items() if action != "unchanged"}
    while True:
        listed = {ix["name"]: ix for ix in facts.list_search_indexes()}
        waited = monotonic() - start
        pending = sorted(n for n in touched if listed.get(n, {}).get("status") not in ("READY", "FAILED"))
        if not pending or waited >= wait_s:
            break
        states = ", ".join(f"{facts.name}.{n} {listed.get(n, {}).get('status', 'PENDING')}" for n in pending)
        progress(f"waiting for Atlas search indexes to be READY: {states} ({waited:.0f} s of {wait_s:.0f} s)")
        sleep(min(POLL_S, max(0.0, wait_s - waited)))
    return [
        IndexOutcome(f"{facts.name}.{name}", action, listed.get(name, {}).get("status", "PENDING"),
                     bool(listed.get(name, {}).get("queryable")), waited)
        for name, action in actions.items()
    ]


def create_search_indexes(
    store: Collections, settings, *, wait_s: float | None = None, progress: Callable[[str], None] = print,
) -> list[IndexOutcome]:
    """The facts collection's indexes for the configured embedder's dimension (its ``dim``,
    the one source of the vector size)."""
    from pipeline.embeddings import open_embedder

    dim = open_embedder(settings).dim
    return ensure_search_indexes(store.col("facts"), dim, progress=progress,
                                 wait_s=settings.atlas_index_wait_s if wait_s is None else wait_s)
