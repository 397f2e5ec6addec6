"""consolidate: prompt builder and answer model (SPEC §5.5). The pipeline renders the blob
(``VERSION: n`` then ``[SECTION]`` and ``- `` bullets) from the structured sections."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class BlobSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Section name, e.g. PREFERENCES; kept across consolidations.")
    bullets: list[str]


class ConsolidationAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sections: list[BlobSection]
