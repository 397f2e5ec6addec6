"""HTTP shapes of spend caps (``/v1/admin/caps``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.caps import SpendCaps
from schemas.values import Id


class CapsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent_id: Id | None = Field(default=None, description="the agent whose caps these are; null: the global caps")
    caps: SpendCaps | None = Field(description="the caps; null removes them (MEMORY_SPEND_CAPS applies again)")


class CapLevel(BaseModel):
    window: str
    kind: str
    cap_usd: float
    level: int = Field(description="0, 80 (at 80% of the cap or more) or 100 (reached)")


class CapsRow(BaseModel):
    agent_id: str | None = Field(description="null: the global caps, against every agent's spend")
    caps: SpendCaps
    source: str = Field(description="set (at run time) or settings (MEMORY_SPEND_CAPS)")
    spend_usd: dict[str, float] = Field(description="priced spend so far, per window (day, month)")
    unpriced_calls: dict[str, int] = Field(description="calls with no price per window: not counted")
    state: str = Field(description="ok, soft or hard")
    levels: list[CapLevel]


class CapsOut(BaseModel):
    day: str
    month: str
    note: str
    agent_default: SpendCaps
    global_: CapsRow = Field(alias="global")
    agents: list[CapsRow]

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
