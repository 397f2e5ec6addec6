"""decide_facts: prompt builder and answer model (SPEC §5.3). The model sees integer aliases only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class FactDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    new: int = Field(description="Alias of the new fact this decision is about.")
    action: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    existing: int | None = Field(
        default=None, description="Alias of the existing fact updated or contradicted (UPDATE, DELETE)."
    )
    text: str | None = Field(default=None, description="The merged text, for UPDATE only.")


class DecisionsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[FactDecision]
