"""Documents examined per query, as MongoDB's ``explain`` reports ``totalDocsExamined``, for
the emulation (which has no query planner): the missing-index detector of design §11
"Provenance and erasure".

How MongoDB plans a query (https://www.mongodb.com/docs/manual/core/query-plans/ and
"Indexing Strategies / Create Indexes to Support Your Queries"):
- an index can serve a query when the query has a predicate on the index's *first* field; the
  bounds then extend over the following key fields while each has an equality (``$eq``, a
  plain value, ``$in``, ``null``), and stop after the first range field (``$gt`` ...);
- the planner keeps the candidate plan that does the least work; with no usable index it
  scans the collection (``COLLSCAN``), examining every document;
- each branch of a top-level ``$or`` is planned on its own (one index scan per branch, or a
  collection scan if any branch has none);
- the documents examined by an index scan are those whose keys fall within the bounds (the
  rest of the filter is applied to the fetched documents). Multikey indexes index each
  array element, so an equality on an array field matches documents holding the element.

``examined`` computes that: for each declared index (``index_information``, ``_id``
included) the documents within its bounds, the least of them, or the whole collection. A
regex is not treated as bounded (anchored prefix regexes can be in MongoDB: this side errs
towards reporting a scan, never towards hiding one).

``Recorder`` collects, for every filtered operation while it is on, the collection, the
filter, the documents examined and the documents the whole filter matches ("returned": for
counts, updates and deletes, their matched set).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

_EQUALITY = ("$eq", "$in")
_RANGE = ("$gt", "$gte", "$lt", "$lte")
#: operations whose first argument (or ``filter``) is a query filter
FILTERED = {"find", "find_one", "count_documents", "delete_one", "delete_many", "update_one", "update_many",
            "replace_one", "find_one_and_update", "find_one_and_replace", "find_one_and_delete", "distinct"}


def _bound(value: Any) -> str | None:
    """``eq`` or ``range`` when a predicate can bound an index scan, else None."""
    if not isinstance(value, dict) or not any(str(k).startswith("$") for k in value):
        return "eq"  # a plain value (null and arrays included) is an equality
    ops = set(value)
    if ops <= set(_EQUALITY):
        return "eq"
    if ops <= set(_RANGE):
        return "range"
    return None


def _predicates(query: dict) -> dict[str, Any]:
    """The top-level field predicates of ``query`` (``$and`` merged), without ``$or``."""
    out: dict[str, Any] = {}
    for key, value in query.items():
        if key == "$and":
            for part in value:
                out.update(_predicates(part))
        elif not key.startswith("$"):
            out[key] = value
    return out


def _index_scan(raw, query: dict, keys: list[tuple[str, Any]]) -> int | None:
    """Documents within ``keys``' bounds for ``query``, or None if the index cannot serve it."""
    preds = _predicates(query)
    bounds: dict[str, Any] = {}
    for name, _ in keys:
        kind = _bound(preds[name]) if name in preds else None
        if kind is None:
            break
        bounds[name] = preds[name]
        if kind == "range":
            break
    if not bounds:
        return None
    return raw.count_documents(bounds)


def examined(raw, query: dict | None) -> tuple[str, int]:
    """(plan, documents examined) for ``query`` on the emulated collection ``raw``."""
    query = query or {}
    total = raw.count_documents({})
    if "$or" in query:
        rest = {k: v for k, v in query.items() if k != "$or"}
        plans = [examined(raw, {**rest, **branch}) for branch in query["$or"]]
        if any(plan == "COLLSCAN" for plan, _ in plans):
            return "COLLSCAN", total
        return "OR(" + ", ".join(p for p, _ in plans) + ")", sum(n for _, n in plans)
    indexes = [(name, spec["key"]) for name, spec in raw.index_information().items()]
    best = ("COLLSCAN", total)
    for name, keys in indexes:
        found = _index_scan(raw, query, list(keys))
        if found is not None and found < best[1]:
            best = (f"IXSCAN {name}", found)
    return best


@dataclass
class Query:
    collection: str
    operation: str
    filter: dict
    plan: str
    examined: int
    returned: int

    def too_costly(self, factor: int = 10, slack: int = 10) -> bool:
        """Whether it examined more than ``factor`` × (returned + ``slack``) documents."""
        return self.examined > factor * (self.returned + slack)


@dataclass
class Recorder:
    queries: list[Query] = field(default_factory=list)
    on: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, raw, operation: str, args: tuple, kwargs: dict) -> None:
        if not self.on or operation not in FILTERED:
            return
        if operation == "distinct":
            query = args[1] if len(args) > 1 else kwargs.get("filter")
        else:
            query = args[0] if args else kwargs.get("filter")
        plan, n = examined(raw, query)
        with self._lock:
            self.queries.append(Query(raw.name, operation, query or {}, plan, n, raw.count_documents(query or {})))


#: the one recorder every emulated collection reports to (one process, like the emulation's lock)
EXPLAIN = Recorder()
