"""Documents in and out of MongoDB: pydantic models as BSON-ready dicts, timestamps as
timezone-aware UTC (BSON keeps milliseconds), and the duplicate-key error of pymongo."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel
from pymongo.errors import DuplicateKeyError

T = TypeVar("T", bound=BaseModel)

__all__ = ["DuplicateKeyError", "escape_key", "escape_keys", "from_doc", "to_doc", "unescape_keys"]

# Free-form maps (stage outputs, run totals) may be keyed by scope keys such as
# ``user:<id>``, and ids may hold ``.`` or ``$``, which MongoDB field names must not. Such keys
# are percent-encoded on the way in and decoded on the way out; every other key is unchanged.
_ESCAPES = (("%", "%25"), (".", "%2E"), ("$", "%24"))


def escape_key(key: str) -> str:
    for raw, code in _ESCAPES:
        key = key.replace(raw, code)
    return key


_CODE = re.compile("%(25|2E|24)")
_DECODE = {code[1:]: raw for raw, code in _ESCAPES}


def _unescape_key(key: str) -> str:
    return key if "%" not in key else _CODE.sub(lambda m: _DECODE[m.group(1)], key)


def escape_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {escape_key(str(k)): escape_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_keys(v) for v in value]
    return value


def unescape_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_unescape_key(k): unescape_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unescape_keys(v) for v in value]
    return value


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
