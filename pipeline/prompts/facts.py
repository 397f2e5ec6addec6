"""extract_facts: prompt builder and answer model (SPEC §5.1)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ExtractedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="One atomic, objective, enduring fact, at most 30 words.")
    scope: Literal["user", "agent"] = Field(
        description="user: about the human in this one-to-one chat; agent: true for every user of this agent."
    )


class FactsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[ExtractedFact]
