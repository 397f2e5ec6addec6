"""One fact ``search_facts`` found (design §6): the one model a hit is, from the retrieval that
builds it to every door that answers with it (the HTTP API's ``SearchResponse``, MCP, the
inspector, the in-process facade).

Times stay datetimes inside (``aged_from`` compares them); they are written out, wherever the
hit is serialised, as ISO 8601 with their own offset: the documented shape, and the one the
pinned OpenAPI document describes (plain strings).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from schemas.documents import FactScope

#: ``isoformat()``, not pydantic's own writing, which turns ``+00:00`` into ``Z``: callers
#: (and the tests pinning the documented shape) read back the offset the time was stored with
Iso = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str)]
#: the wire documents the scope as a string (docs/openapi.json is pinned); inside it is checked
Scope = Annotated[FactScope, WithJsonSchema({"type": "string"}, mode="serialization")]


# One fact found: the text shown, its times, its age as the agent reads it, its fused score.
# (A comment, not a docstring: a docstring would become the schema's description, and the
# pinned OpenAPI document has none for it.)
class SearchHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    content: str
    scope: Scope
    formed_at: Iso
    #: the latest change of the text shown (as of a past time: when that version was recorded)
    updated_at: Iso
    age: str
    score: float
    #: set on a hit searched as of a past time only: when the text shown was valid
    valid_from: Iso | None = None
    valid_to: Iso | None = None
    #: when the fact stops being true (design §13 "Expiry"); None: no end foreseen
    expires_at: Iso | None = None
    #: the agent's categories it is filed under, and the filterable metadata of the messages it
    #: came from (design §13 "Categories and metadata")
    categories: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def aged_from(self) -> datetime:
        """What ``age`` counts from: the latest change, or as of a past time the moment the
        text became valid (it may have been recorded later, by a replay)."""
        return self.valid_from or self.updated_at

    def as_result(self) -> dict[str, Any]:
        """The in-process facade's dict: ``{id, content, scope, formed_at, updated_at, age,
        score}``; a hit searched as of a past time adds ``valid_from`` and ``valid_to`` (None:
        still valid), a fact that expires adds ``expires_at``, one filed or carrying metadata
        adds ``categories`` and ``metadata``."""
        out = self.model_dump(exclude={"age", "score", "valid_from", "valid_to", "expires_at", "categories", "metadata"})
        if self.valid_from is not None:
            out |= self.model_dump(include={"valid_from", "valid_to"})
        if self.expires_at is not None:
            out |= self.model_dump(include={"expires_at"})
        out |= {k: v for k, v in self.model_dump(include={"categories", "metadata"}).items() if v}
        return out | self.model_dump(include={"age", "score"})
