"""A message's metadata, what a fact keeps of it, and the labels filters match (design §13
"Categories and metadata").

A producer may give a ``message.added`` event a ``metadata`` object: at most ``MAX_KEYS`` keys,
each a name (``KEY_PATTERN``), each value a string (at most ``MAX_VALUE_CHARS`` characters), a
whole number (within JSON's exact integers, ±2^53) or a boolean. Fractions are refused: a filter
matches values exactly, and 0.1 + 0.2 is not 0.3. Nested objects and lists are refused: a filter
names a key and the values it may hold.

A fact keeps the keys of its agent's filterable list (``AgentSettings.metadata_keys``) from the
messages it came from. Messages that disagree leave the fact with every value they gave, as a
list: a fact formed from a message of project "apollo" and one of "zeus" is found by either.

A fact's *labels* are its categories and its metadata pairs as strings, one list the stores
index once for every agent (``category:travel``, ``meta:project="apollo"``, ``meta:tier=2``):
an Atlas index declares its filter paths per collection, so one label path serves every agent's
keys without a new index definition each time an owner marks a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from schemas.values import text_problem

MAX_KEYS = 16
MAX_VALUE_CHARS = 200
#: values one fact keeps per key, and one filter accepts per key
MAX_VALUES = 20
KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$"
KEY = re.compile(KEY_PATTERN)
JSON_SAFE = 2 ** 53


def _checked_value(value: Any) -> Any:
    problem = value_problem(value)
    if problem:
        raise PydanticCustomError("metadata_value", problem)
    return value


def _checked_key(key: Any) -> str:
    if not isinstance(key, str) or not KEY.match(key):
        raise PydanticCustomError("metadata_key", "is not a metadata key: a letter, then letters, digits, _, . or -, "
                                                  "at most 64 characters")
    return key


_VALUE_SCHEMA = {"anyOf": [{"type": "string", "maxLength": MAX_VALUE_CHARS},
                           {"type": "integer", "minimum": -JSON_SAFE, "maximum": JSON_SAFE}, {"type": "boolean"}]}
MetaKey = Annotated[str, PlainValidator(_checked_key), WithJsonSchema({"type": "string", "pattern": KEY_PATTERN})]
#: one value: checked by ``value_problem``, whose reason is the error's
MetaValue = Annotated[Any, PlainValidator(_checked_value), WithJsonSchema(_VALUE_SCHEMA)]
#: what a message event carries
EventMetadata = Annotated[dict[MetaKey, MetaValue], Field(max_length=MAX_KEYS)]
#: what a fact keeps per key: one value, or the values its messages disagreed on (a list)
FactMetadata = dict[str, Any]
#: a filter as tool arguments for a model (MCP, ``search_facts``'s tool definition): categories,
#: any of; per metadata key a value or a list of values (any of), every key. The names and
#: values are checked against the agent by ``pipeline.search.filters``, whose errors list the
#: agent's own, so a model that guesses wrong reads what it may use.
FILTER_CATEGORIES_HELP = ("Only facts filed under any of these categories, e.g. ['travel', 'finance']. The names "
                          "are the agent's own; an unknown name is an error that lists them.")
FILTER_METADATA_SCHEMA = {
    "type": "object", "maxProperties": MAX_KEYS,
    "additionalProperties": {"anyOf": [*_VALUE_SCHEMA["anyOf"],
                                       {"type": "array", "items": _VALUE_SCHEMA, "minItems": 1, "maxItems": MAX_VALUES}]},
    "description": ("Only facts whose conversations carried these metadata values, e.g. {\"project\": \"apollo\"}; "
                    "every key must match, and a list matches any of its values ({\"tier\": [1, 2]}). Keys are the "
                    "ones the owner made filterable; an unknown key is an error that lists them."),
}

#: a fact's whole metadata as a person sets it (an edit): per key a value, or the list of values
#: a fact holds for it. Read as given and judged against the agent by the edit
#: (``pipeline.owner.metadata_keys.check_given``), which names ``metadata.<key>`` and lists the
#: agent's keys; here only its shape, for the API's document.
HeldMetadata = Annotated[dict[str, Any], Field(max_length=MAX_KEYS), WithJsonSchema({
    **{k: v for k, v in FILTER_METADATA_SCHEMA.items() if k != "description"},
    "description": ("the fact's metadata from now on, replacing what it holds: per filterable key of the agent a "
                    "value or a list of values, e.g. {\"project\": \"apollo\", \"tier\": [1, 2]}; {} for none")})]


def value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a metadata value, or None when it can."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if -JSON_SAFE <= value <= JSON_SAFE else f"the number {value} is outside ±2^53"
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            return f"has {len(value)} characters; a value has at most {MAX_VALUE_CHARS}"
        return text_problem(value)
    if isinstance(value, float):
        return f"{value!r} is a fraction; a value is a string, a whole number or a boolean"
    kind = {list: "a list", tuple: "a list", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
    return f"is {kind}; a value is a string, a whole number or a boolean"


def values_of(held: Any) -> list[Any]:
    """The values one key of a fact holds, as a list."""
    return list(held) if isinstance(held, list) else [held]


def _key(value: Any) -> tuple[str, Any]:
    # True == 1 in Python: a value's type is part of what it is
    return type(value).__name__, value


def merged(kept: Mapping[str, Any], added: Mapping[str, Any], keys: Iterable[str] | None = None) -> dict[str, Any]:
    """``kept`` with the values of ``added`` (only ``keys`` of it, when given) joined per key:
    a key holding one value stays a value, two or more become a list (first seen first, at
    most ``MAX_VALUES``)."""
    wanted = None if keys is None else set(keys)
    out: dict[str, list[Any]] = {k: values_of(v) for k, v in kept.items()}
    for key, held in added.items():
        if wanted is not None and key not in wanted:
            continue
        values = out.setdefault(key, [])
        seen = {_key(v) for v in values}
        for value in values_of(held):
            if _key(value) not in seen and len(values) < MAX_VALUES:
                values.append(value)
                seen.add(_key(value))
    return {k: (v[0] if len(v) == 1 else v) for k, v in sorted(out.items()) if v}


def category_label(name: str) -> str:
    return f"category:{name}"


def metadata_label(key: str, value: Any) -> str:
    """``meta:<key>=<the value as JSON>``: "2" and 2 and true stay apart."""
    return f"meta:{key}={json.dumps(value, ensure_ascii=False)}"


def labels(categories: Sequence[str], metadata: Mapping[str, Any]) -> list[str]:
    """Every label of a fact with these categories and metadata, sorted, each once."""
    found = {category_label(c) for c in categories}
    found.update(metadata_label(k, v) for k, held in metadata.items() for v in values_of(held))
    return sorted(found)
