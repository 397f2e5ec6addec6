"""Requests and responses of an owner's routes (design §13 "Owner controls"): Memory
Instructions and pauses, under ``/v1/agents/{agent_id}``. Part of the OpenAPI document."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt

from schemas.api import MyFact, MyReflection, _In
from schemas.events import Id
from schemas.owner import InstructionScope, InstructionStage


class InstructionText(_In):
    #: the word limit (300) and the screen are checked by the pipeline, which names them
    text: str = Field(min_length=1, max_length=4000)


class InstructionRollback(_In):
    version: StrictInt = Field(ge=1)


class InstructionOut(BaseModel):
    stage: InstructionStage
    scope: InstructionScope
    version: int
    text: str = Field(description='the text; "" for a version that cleared the instruction')
    set_by: str = Field(description="the credential id that set it")
    set_at: datetime
    rolled_back_to: int | None = None


class InstructionsOut(BaseModel):
    agent_id: str
    current: list[InstructionOut] = Field(description="the text each (stage, scope) carries now; cleared ones left out")
    history: list[InstructionOut] = Field(description="every version, by stage, scope and version")


class PauseRequest(_In):
    target: Literal["all", "agent", "session"] = Field(
        description="all: the whole agent; agent: its agent memory; session: one session's memory")
    session_id: Id | None = None


class ResumeRequest(PauseRequest):
    backfill: StrictBool = Field(False, description="form from the messages that arrived while paused")


class PauseOut(BaseModel):
    scope_key: str = Field(description='"*" (the whole agent), "agent" or "session:<id>"')
    paused_at: datetime
    paused_by: str


class PausesOut(BaseModel):
    agent_id: str
    paused: list[PauseOut]


class Resumed(BaseModel):
    scope_key: str
    paused_at: datetime
    resumed_at: datetime
    backfill_runs: list[str] = Field(default_factory=list, description="runs started to form the paused window")


class CuratedFacts(BaseModel):
    agent_id: str
    total: int = Field(description="live agent-scope facts in all")
    facts: list[MyFact]


class CuratedReflections(BaseModel):
    agent_id: str
    reflections: list[MyReflection]


class SectionLines(_In):
    bullets: list[str] = Field(max_length=200, description="the section's lines; [] removes the section")


class SectionEdit(SectionLines):
    scope: Literal["agent", "session"] = "agent"
    session_id: Id | None = None


class BlobReplace(_In):
    content: str = Field(min_length=1, max_length=20_000,
                         description="the blob: [SECTION] headers and '- ' lines, or plain lines")


class BlobOut(BaseModel):
    agent_id: str
    scope_key: str
    version: int
    consolidated_content: str
    word_limit: int
    edited_by: str | None
    edited_at: datetime | None


class CategoryNames(_In):
    #: each name is checked by the pipeline, which names the first bad one (``categories[i]``)
    categories: list[str] = Field(max_length=50, description="the new list, in order; [] files no fact under any")


class CategoryVersionOut(BaseModel):
    version: int
    names: list[str]
    set_by: str = Field(description="the credential id that set it")
    set_at: datetime
    rolled_back_to: int | None = None


class CategoriesOut(BaseModel):
    agent_id: str
    categories: list[str] = Field(description="the list extraction files new facts under now")
    version: int = Field(description="the current version; 0: the default list, never changed")
    history: list[CategoryVersionOut] = Field(description="every version, oldest first")


class MetadataKeyNames(_In):
    #: each key is checked by the pipeline, which names the first bad one (``metadata_keys[i]``)
    metadata_keys: list[str] = Field(max_length=16, description="the event metadata keys facts keep from now on; "
                                                                "[] keeps none")


class MetadataKeysOut(BaseModel):
    agent_id: str
    metadata_keys: list[str] = Field(description="the keys of a message's metadata that the facts formed from it "
                                                 "keep, and filters may name; facts formed before a change keep "
                                                 "what they have")
