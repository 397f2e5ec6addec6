"""An owner's controls of one agent, kept on its ``AgentSettings`` (design §13 "Owner
controls"): Memory Instructions, versioned, and what is paused.

An instruction is never edited in place: setting, clearing or rolling back appends a version
that names who (a credential id) and when, so the history shows every text the prompts ever
carried. A pause names a scope key (``agent``, ``session:<id>``) or ``*``, the whole agent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

InstructionStage = Literal["extraction", "consolidation"]
#: ``all``: every scope type of the agent; the others refine it for one scope type
InstructionScope = Literal["all", "agent", "user", "session"]
INSTRUCTION_STAGES: tuple[InstructionStage, ...] = ("extraction", "consolidation")
INSTRUCTION_SCOPES: tuple[InstructionScope, ...] = ("all", "agent", "user", "session")
#: the whole agent: nothing is formed for any of its scopes
WHOLE_AGENT = "*"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Instruction(_Doc):
    """One version of the instruction for (stage, scope); ``text`` "" is a clear."""

    stage: InstructionStage
    scope: InstructionScope = "all"
    version: int
    text: str = ""
    set_by: str
    set_at: datetime
    rolled_back_to: int | None = None   # the version whose text this one brings back


class Pause(_Doc):
    """A paused scope key of the agent (or ``*``): nothing is formed for it until resumed."""

    scope_key: str
    paused_at: datetime
    paused_by: str


class CategoryList(_Doc):
    """One version of the agent's category list (design §13 "Categories and metadata"):
    extraction files each fact under zero or more of ``names``; a change appends a version."""

    version: int
    names: list[str]
    set_by: str
    set_at: datetime
    rolled_back_to: int | None = None   # the version whose list this one brings back
