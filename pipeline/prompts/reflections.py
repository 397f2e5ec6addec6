"""extract_reflections: prompt builder and answer model (SPEC §5.4), hierarchical."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReflectionsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: list[str] = Field(description="Agent-level reflections, each at most 35 words.")
    user: list[str] = Field(description="User-level reflections not already held at agent level.")
    session: list[str] = Field(description="Session-level reflections held by neither level above.")
