"""Documents in and out of MongoDB: pydantic models as BSON-ready dicts, timestamps as
timezone-aware UTC (BSON keeps milliseconds), and the duplicate-key error of pymongo."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel
from pymongo.errors import DuplicateKeyError

T = TypeVar("T", bound=BaseModel)

__all__ = ["DuplicateKeyError", "from_doc", "to_doc"]


def to_doc(model: BaseModel, _id: Any = None, *, exclude: set[str] | None = None) -> dict:
    doc = model.model_dump(exclude=exclude)
    if _id is not None:
        doc["_id"] = _id
    return doc


def _aware(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
    if isinstance(value, dict):
        return {k: _aware(v) for k, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], (dict, datetime)):
        return [_aware(v) for v in value]
    return value


def from_doc(cls: type[T], doc: dict | None) -> T | None:
    """The model of a stored document (``_id`` and internal fields are ignored by the model).

    A client built without ``tz_aware=True`` returns naive datetimes: they are UTC."""
    if doc is None:
        return None
    return cls.model_validate(_aware(doc))
