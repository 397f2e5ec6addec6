"""Spend caps (design §13 "Operator controls"): USD per UTC day and per UTC month, a soft cap
and a hard cap each, for one agent or for every agent together. Unset: no cap."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the store's owner of the global caps (an agent id is never empty: ``schemas.values.Id``)
GLOBAL = ""
WINDOWS = ("day", "month")
Window = Literal["day", "month"]


class WindowCaps(BaseModel):
    """The caps of one window: soft (premium stages move to the fast tier) and hard (formation
    waits); None: no cap."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    soft_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False, strict=True)
    hard_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False, strict=True)

    @model_validator(mode="after")
    def _soft_below_hard(self) -> "WindowCaps":
        if self.soft_usd is not None and self.hard_usd is not None and self.soft_usd > self.hard_usd:
            raise ValueError(f"soft_usd ({self.soft_usd}) is above hard_usd ({self.hard_usd}): a soft cap is "
                             "reached first")
        return self


class SpendCaps(BaseModel):
    """Daily and monthly caps of one owner (an agent, or every agent together)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    day: WindowCaps = WindowCaps()
    month: WindowCaps = WindowCaps()

    def window(self, name: str) -> WindowCaps:
        return self.day if name == "day" else self.month

    @property
    def empty(self) -> bool:
        return all(c.soft_usd is None and c.hard_usd is None for c in (self.day, self.month))


class CapsSetting(BaseModel):
    """``MEMORY_SPEND_CAPS``: the global caps and the default caps of every agent (an agent's
    own caps, set at run time, replace the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    global_: SpendCaps = Field(default=SpendCaps(), alias="global")
    agent: SpendCaps = SpendCaps()
