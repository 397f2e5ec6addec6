"""The rules Atlas applies to search index definitions, ``$vectorSearch`` and ``$search``, for
the Mongo test emulation: each refusal raises what the server raises (``OperationFailure``
with the server's code where it has one) and names its source.

Sources:
- VS_STAGE: https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-stage/
- VS_INDEX: https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-type/
- VS_FILTER_SRC: mongodb/mongo ``src/mongo/db/query/vector_search/filter_validator.cpp`` and its
  ``filter_validator_test.cpp`` (codes 7828300 operator, 7828301 operand type, 7828302 null in
  an array, 7828303 regex in an array)
- SEARCH_STAGE: https://www.mongodb.com/docs/atlas/atlas-search/aggregation-stages/search/
- TEXT_OP: https://www.mongodb.com/docs/atlas/atlas-search/text/
- EQUALS_OP: https://www.mongodb.com/docs/atlas/atlas-search/equals/
- IN_OP: https://www.mongodb.com/docs/atlas/atlas-search/in/
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from bson import Binary, Decimal128, ObjectId
from pymongo.errors import OperationFailure

VS_STAGE = "https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-stage/"
VS_INDEX = "https://www.mongodb.com/docs/atlas/atlas-vector-search/vector-search-type/"
VS_FILTER_SRC = "mongodb/mongo src/mongo/db/query/vector_search/filter_validator_test.cpp"
SEARCH_STAGE = "https://www.mongodb.com/docs/atlas/atlas-search/aggregation-stages/search/"
TEXT_OP = "https://www.mongodb.com/docs/atlas/atlas-search/text/"
EQUALS_OP = "https://www.mongodb.com/docs/atlas/atlas-search/equals/"
IN_OP = "https://www.mongodb.com/docs/atlas/atlas-search/in/"

#: VS_FILTER_SRC: AllowGT/GTE/LT/LTE/Equality/NE/In/Nin/And/Or; DisallowExists, DisallowNor,
#: DisallowRegex, DisallowType, DisallowExpr, ... all raise 7828300. ``$not`` is listed as
#: supported on VS_STAGE ("Atlas Vector Search Pre-Filter").
VS_FIELD_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$not"})
VS_LOGICAL_OPERATORS = frozenset({"$and", "$or"})
#: VS_STAGE fields table
VS_STAGE_FIELDS = frozenset({"index", "path", "queryVector", "numCandidates", "limit", "filter", "exact"})
#: VS_STAGE: "Value must be less than or equal to (<=) 10000"
MAX_NUM_CANDIDATES = 10_000
#: VS_INDEX: numDimensions "must be less than or equal to 8192"
MAX_DIMENSIONS = 8192
SIMILARITIES = frozenset({"cosine", "euclidean", "dotProduct"})
#: SEARCH_STAGE: the operators this emulation executes; other operators are refused as
#: unimplemented (never silently ignored)
SEARCH_OPERATORS = frozenset({"compound", "text", "equals", "in"})
SEARCH_OPTIONS = frozenset({"index", "highlight", "count", "returnStoredSource", "scoreDetails", "concurrent"})
COMPOUND_CLAUSES = frozenset({"must", "mustNot", "should", "filter", "minimumShouldMatch", "score"})


def refuse(message: str, source: str, code: int = 8) -> OperationFailure:
    """The error to raise; the message carries the rule's source for whoever reads the test."""
    return OperationFailure(f"{message} [rule: {source}]", code=code)


# --------------------------------------------------------------------------- index definitions
def check_index_model(model: dict[str, Any]) -> None:
    name, kind, definition = model.get("name") or "default", model.get("type") or "search", model.get("definition")
    if not isinstance(definition, dict):
        raise refuse(f"search index {name!r}: definition must be a document", SEARCH_STAGE, 9)
    if kind == "vectorSearch":
        check_vector_definition(name, definition)
    elif kind == "search":
        check_search_definition(name, definition)
    else:
        raise refuse(f"search index {name!r}: unknown type {kind!r} (search or vectorSearch)", VS_INDEX, 9)


def check_vector_definition(name: str, definition: dict[str, Any]) -> None:
    fields = definition.get("fields")
    if not isinstance(fields, list) or not fields:
        raise refuse(f"vector index {name!r}: 'fields' must be a non-empty array", VS_INDEX, 9)
    vectors = 0
    for field in fields:
        kind, path = field.get("type"), field.get("path")
        if not isinstance(path, str) or not path:
            raise refuse(f"vector index {name!r}: every field needs a 'path'", VS_INDEX, 9)
        if kind == "vector":
            vectors += 1
            dims = field.get("numDimensions")
            if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= MAX_DIMENSIONS:
                raise refuse(f"vector index {name!r}: numDimensions must be an int in 1..{MAX_DIMENSIONS}, got {dims!r}",
                             VS_INDEX, 9)
            if field.get("similarity") not in SIMILARITIES:
                raise refuse(f"vector index {name!r}: similarity must be one of {sorted(SIMILARITIES)}", VS_INDEX, 9)
        elif kind != "filter":
            raise refuse(f"vector index {name!r}: field type {kind!r} is neither 'vector' nor 'filter'", VS_INDEX, 9)
    if not vectors:
        raise refuse(f"vector index {name!r}: no field of type 'vector'", VS_INDEX, 9)


def check_search_definition(name: str, definition: dict[str, Any]) -> None:
    mappings = definition.get("mappings")
    if not isinstance(mappings, dict) or "dynamic" not in mappings:
        raise refuse(f"search index {name!r}: 'mappings' with 'dynamic' is required", SEARCH_STAGE, 9)
    if not mappings["dynamic"] and not mappings.get("fields"):
        raise refuse(f"search index {name!r}: static mappings need 'fields'", SEARCH_STAGE, 9)


def declared_vector(definition: dict[str, Any], path: str) -> dict[str, Any] | None:
    return next((f for f in definition["fields"] if f["type"] == "vector" and f["path"] == path), None)


def declared_filters(definition: dict[str, Any]) -> set[str]:
    return {f["path"] for f in definition["fields"] if f["type"] == "filter"}


# --------------------------------------------------------------------------- $vectorSearch
def check_vector_stage(spec: Any, definition: dict[str, Any] | None) -> None:
    """``definition``: the named index's serving definition (None: no such vector index)."""
    if not isinstance(spec, dict):
        raise refuse("$vectorSearch takes a document", VS_STAGE, 9)
    unknown = set(spec) - VS_STAGE_FIELDS
    if unknown:
        raise refuse(f"BSON field '$vectorSearch.{sorted(unknown)[0]}' is an unknown field", VS_STAGE, 40415)
    for key in ("index", "path", "queryVector", "limit"):
        if key not in spec:
            raise refuse(f"$vectorSearch.{key} is required", VS_STAGE, 40414)
    limit, exact = spec["limit"], spec.get("exact", False)
    if not _is_int(limit) or limit <= 0:
        raise refuse(f"$vectorSearch.limit must be a positive int, got {limit!r}", VS_STAGE, 9)
    if not exact:
        candidates = spec.get("numCandidates")
        if not _is_int(candidates):
            raise refuse("$vectorSearch.numCandidates is required (an int) unless exact is true", VS_STAGE, 9)
        if candidates > MAX_NUM_CANDIDATES:
            raise refuse(f"$vectorSearch.numCandidates must be <= {MAX_NUM_CANDIDATES}, got {candidates}", VS_STAGE, 7912700)
        if candidates < limit:
            raise refuse(f"$vectorSearch.numCandidates ({candidates}) must be >= limit ({limit})", VS_STAGE, 7912700)
    elif "numCandidates" in spec:
        raise refuse("$vectorSearch.numCandidates must be omitted when exact is true", VS_STAGE, 9)
    vector = spec["queryVector"]
    if not isinstance(vector, list) or not vector or not all(_is_number(x) for x in vector):
        raise refuse("$vectorSearch.queryVector must be a non-empty array of numbers", VS_STAGE, 9)
    if definition is None:
        # VS_STAGE: "Atlas Vector Search doesn't return results if you misspell the index name or
        # if the specified index doesn't already exist". The emulation refuses instead, so that
        # a test cannot pass on an empty answer that a missing index produced.
        raise refuse(f"$vectorSearch: no vector search index named {spec['index']!r} on this collection "
                     "(Atlas would answer nothing)", VS_STAGE)
    field = declared_vector(definition, spec["path"])
    if field is None:
        raise refuse(f"Path '{spec['path']}' needs to be indexed as vector", VS_INDEX)
    if field["numDimensions"] != len(vector):
        raise refuse(f"vector field is indexed with {field['numDimensions']} dimensions but queried with "
                     f"{len(vector)}", VS_INDEX)
    if "filter" in spec:
        check_vector_filter(spec["filter"], declared_filters(definition))


def check_vector_filter(node: Any, declared: set[str]) -> None:
    if not isinstance(node, dict):
        raise refuse("$vectorSearch.filter must be a document", VS_STAGE, 9)
    for key, value in node.items():
        if key in VS_LOGICAL_OPERATORS:
            if not isinstance(value, list) or not value:
                raise refuse(f"{key} takes a non-empty array", VS_FILTER_SRC, 2)
            for item in value:
                check_vector_filter(item, declared)
        elif key.startswith("$"):
            raise refuse(f"Operator not supported for $vectorSearch filter: {key}", VS_FILTER_SRC, 7828300)
        else:
            if key not in declared:
                # VS_INDEX: "filter" fields are the fields to pre-filter on; mongot refuses others
                raise refuse(f"Path '{key}' needs to be indexed as filter", VS_INDEX)
            _check_field_condition(value)


def _check_field_condition(value: Any) -> None:
    if isinstance(value, dict) and value and all(k.startswith("$") for k in value):
        for op, operand in value.items():
            if op not in VS_FIELD_OPERATORS:
                raise refuse(f"Operator not supported for $vectorSearch filter: {op}", VS_FILTER_SRC, 7828300)
            if op == "$not":
                if not isinstance(operand, dict):
                    raise refuse("$not needs an operator document", VS_FILTER_SRC, 2)
                _check_field_condition(operand)
            elif op in ("$in", "$nin"):
                if not isinstance(operand, list):
                    raise refuse(f"{op} needs an array", VS_FILTER_SRC, 2)
                for item in operand:
                    if item is None:
                        raise refuse("Operand type is not supported for $vectorSearch: null", VS_FILTER_SRC, 7828302)
                    if isinstance(item, re.Pattern):
                        raise refuse("Operand type is not supported for $vectorSearch: regex", VS_FILTER_SRC, 7828303)
                    _check_operand(item)
            else:
                _check_operand(operand)
    else:
        _check_operand(value)  # {path: value} is an implicit $eq


def _check_operand(value: Any) -> None:
    """VS_STAGE: "boolean, date, objectId, numeric, string and UUID"; VS_FILTER_SRC
    DisallowOperandTypeNull / Object / Array / NumberDecimal."""
    kind = operand_type(value)
    if kind not in {"bool", "date", "objectId", "number", "string", "uuid"}:
        raise refuse(f"Operand type is not supported for $vectorSearch: {kind}", VS_FILTER_SRC, 7828301)


def operand_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, Decimal128):
        return "decimal"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "date"
    if isinstance(value, ObjectId):
        return "objectId"
    if isinstance(value, uuid.UUID) or (isinstance(value, Binary) and value.subtype == 4):
        return "uuid"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


# --------------------------------------------------------------------------- $search
def check_search_stage(spec: Any, definition: dict[str, Any] | None) -> tuple[str, Any]:
    """The one operator of the stage and its spec, after checking the stage's shape."""
    if not isinstance(spec, dict):
        raise refuse("$search takes a document", SEARCH_STAGE, 9)
    operators = [k for k in spec if k not in SEARCH_OPTIONS]
    if len(operators) != 1:
        raise refuse(f"$search needs exactly one operator, got {operators}", SEARCH_STAGE, 9)
    if operators[0] not in SEARCH_OPERATORS:
        raise NotImplementedError(f"the Atlas emulation does not implement the $search operator {operators[0]!r}")
    if definition is None:
        raise refuse(f"$search: no search index named {spec.get('index', 'default')!r} on this collection "
                     "(Atlas would answer nothing)", SEARCH_STAGE)
    return operators[0], spec[operators[0]]


def field_mapping(definition: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The static mapping of ``path`` (a list of mappings is reduced to its first), or a
    dynamic one when the index maps dynamically."""
    mappings = definition["mappings"]
    mapped = mappings.get("fields", {}).get(path)
    if isinstance(mapped, list):
        mapped = mapped[0] if mapped else None
    if mapped is None and mappings.get("dynamic"):
        return {"type": "dynamic"}
    return mapped


def check_text(spec: dict[str, Any], definition: dict[str, Any]) -> None:
    if not isinstance(spec, dict) or "query" not in spec or "path" not in spec:
        raise refuse("text needs 'query' and 'path'", TEXT_OP, 9)
    for path in _paths(spec["path"]):
        mapped = field_mapping(definition, path)
        if mapped is None or mapped.get("type") not in ("string", "dynamic"):
            raise refuse(f"text: path '{path}' is not indexed as string", TEXT_OP)
    fuzzy = spec.get("fuzzy")
    if fuzzy is not None:
        unknown = set(fuzzy) - {"maxEdits", "prefixLength", "maxExpansions"}
        if unknown:
            raise refuse(f"text.fuzzy: unknown option {sorted(unknown)[0]!r}", TEXT_OP, 9)
        if fuzzy.get("maxEdits", 2) not in (1, 2):  # TEXT_OP: "Value can be 1 or 2"
            raise refuse(f"text.fuzzy.maxEdits must be 1 or 2, got {fuzzy.get('maxEdits')!r}", TEXT_OP, 9)
        if not _is_int(fuzzy.get("prefixLength", 0)) or fuzzy.get("prefixLength", 0) < 0:
            raise refuse("text.fuzzy.prefixLength must be a non-negative int", TEXT_OP, 9)
        if not _is_int(fuzzy.get("maxExpansions", 50)) or fuzzy.get("maxExpansions", 50) <= 0:
            raise refuse("text.fuzzy.maxExpansions must be a positive int", TEXT_OP, 9)


#: EQUALS_OP / IN_OP: the field type each value type must be indexed as
_MAPPED_AS = {"bool": "boolean", "string": "token", "number": "number", "date": "date",
              "objectId": "objectId", "uuid": "uuid"}


def check_equals(spec: dict[str, Any], definition: dict[str, Any], operator: str = "equals") -> None:
    source = EQUALS_OP if operator == "equals" else IN_OP
    if not isinstance(spec, dict) or "path" not in spec or "value" not in spec:
        raise refuse(f"{operator} needs 'path' and 'value'", source, 9)
    values = spec["value"] if operator == "in" else [spec["value"]]
    if operator == "in" and (not isinstance(values, list) or not values):
        raise refuse("in: value must be a non-empty array", source, 9)
    for path in _paths(spec["path"]):
        mapped = field_mapping(definition, path)
        for value in values:
            kind = operand_type(value)
            if kind == "null":
                # EQUALS_OP documents null only as "matches null or missing"; what it does on a
                # statically mapped field of another type is not documented: refused here.
                raise refuse(f"{operator}: null on path '{path}' has no documented meaning for a "
                             f"{(mapped or {}).get('type')} field", source, 9)
            wanted = _MAPPED_AS.get(kind)
            if wanted is None:
                raise refuse(f"{operator}: value type {kind} is not supported", source, 9)
            if mapped is None or mapped.get("type") != wanted:
                raise refuse(f"{operator}: path '{path}' needs to be indexed as {wanted}", source)


def _paths(path: Any) -> list[str]:
    return [path] if isinstance(path, str) else list(path)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
