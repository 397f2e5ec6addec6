"""The lines ``memoryctl import`` and ``POST /v1/agents/{agent_id}/import`` read (design §13
"Direct writes and import"): JSON Lines in two forms, each line checked here on its own.

- **Simple** (CRM-style data, no ``kind``): ``{"user_id", "text", "categories"?, "expires_at"?,
  "metadata"?, "import_key"?}``, one fact of that user's memory. Unknown fields are refused, so that a
  misspelt ``categories`` is a reject, not a silent loss.
- **Export** (what ``memoryctl export-user`` and ``GET …/users/{u}/export`` write, ``kind`` on
  each line): ``fact`` (with history), ``reflection``, ``blob`` and ``blob_section`` are
  imported; ``message`` and ``run_cost`` are skipped (messages would be formed again; costs
  are records of the past). Fields an export carries that an import does not need (``shared``)
  are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictBool, StrictInt, StringConstraints
from pydantic_core import PydanticCustomError

from schemas.metadata import MAX_KEYS, MAX_VALUES, MetaKey, MetaValue, value_problem
from schemas.values import Id, Instant, TextChars

#: a category as a line gives it: a short label on one line
Category = Annotated[str, StringConstraints(min_length=1, max_length=50, pattern=r"^[^\x00-\x1f\x7f]+$"), TextChars]
#: a fact's metadata as a write or a simple line gives it: each value checked here, each key
#: by the write (one of the agent's filterable keys, ``pipeline.owner.metadata_keys``)
FactMetadataIn = Annotated[dict[str, MetaValue], Field(max_length=MAX_KEYS)]


def _held(value: Any) -> Any:
    """What one key of an exported fact holds: a value, or the list of values its messages gave."""
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not 2 <= len(value) <= MAX_VALUES:
        raise PydanticCustomError("metadata_values", f"holds {len(value)} values; a list holds 2 to {MAX_VALUES}")
    for i, one in enumerate(values):
        problem = value_problem(one)
        if problem:
            raise PydanticCustomError("metadata_value", (f"[{i}] " if isinstance(value, list) else "") + problem)
    return value


#: a fact's metadata as an export holds it: a key may hold the list of values its messages gave
ExportedMetadata = Annotated[dict[MetaKey, Annotated[Any, PlainValidator(_held)]], Field(max_length=MAX_KEYS)]
#: a memory text (its word limit and screen are the write's, which name them)
MemoryText = Annotated[str, StringConstraints(min_length=1, max_length=4000), TextChars]
#: the kinds of an export line that carry memory, and those an import skips
IMPORTED_KINDS = ("fact", "reflection", "blob", "blob_section")
SKIPPED_KINDS = ("message", "run_cost")


class SimpleLine(BaseModel):
    """One fact for a user's memory, as a CRM or a spreadsheet holds it."""

    model_config = ConfigDict(extra="forbid")

    user_id: Id
    text: MemoryText
    categories: list[Category] = Field(default_factory=list, max_length=20)
    expires_at: Instant | None = None
    metadata: FactMetadataIn = Field(default_factory=dict)
    import_key: Id | None = Field(None, description="the line's key: importing it again adds nothing; "
                                                    "omitted: derived from the user and the text")


class _Exported(BaseModel):
    model_config = ConfigDict(extra="ignore")

    agent_id: Id
    # the person the export is about: the provenance the imported items rest on
    user_id: Id
    scope_key: Annotated[str, StringConstraints(min_length=1, max_length=300), TextChars] | None = None


class ExportedVersion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    content: MemoryText
    version: StrictInt = Field(ge=1)
    changed_at: Instant
    valid_from: Instant | None = None
    valid_to: Instant | None = None


class ExportedFact(_Exported):
    kind: Literal["fact"]
    fact_id: Id
    scope: Literal["agent", "user"]
    content: MemoryText
    source_message_ids: list[Id] = Field(default_factory=list, max_length=1000)
    formed_at: Instant
    updated_at: Instant | None = None
    valid_from: Instant | None = None
    valid_to: Instant | None = None
    retired_at: Instant | None = None
    retired_reason: Annotated[str, StringConstraints(max_length=40), TextChars] | None = None
    version: StrictInt = Field(1, ge=1)
    history: list[ExportedVersion] = Field(default_factory=list, max_length=1000)
    expires_at: Instant | None = None
    categories: list[Category] = Field(default_factory=list, max_length=20)
    metadata: ExportedMetadata = Field(default_factory=dict)


class ExportedReflection(_Exported):
    kind: Literal["reflection"]
    reflection_id: Id
    scope: Literal["agent", "user", "session"]
    content: MemoryText
    source_message_ids: list[Id] = Field(default_factory=list, max_length=1000)
    formed_at: Instant
    absorbed: StrictBool = False
    consolidated_into: StrictInt | None = None


class ExportedBlob(_Exported):
    kind: Literal["blob"]
    content: Annotated[str, StringConstraints(max_length=100_000), TextChars]


class ExportedSection(_Exported):
    kind: Literal["blob_section"]
    section: Annotated[str, StringConstraints(min_length=1, max_length=80), TextChars]
    bullets: list[MemoryText] = Field(max_length=1000)


EXPORTED = {"fact": ExportedFact, "reflection": ExportedReflection, "blob": ExportedBlob,
            "blob_section": ExportedSection}
