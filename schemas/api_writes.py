"""Requests and responses of the direct writes and the import (design §13 "Direct writes and
import"), under ``/v1/agents/{agent_id}``. Part of the OpenAPI document."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.api import _In, text
from schemas.events import Id
from schemas.imports import Category, FactMetadataIn
from schemas.values import Instant


class FactAdd(_In):
    #: the word limit and the screen are checked by the write, which names them
    content: text(2000, min_length=1)
    expires_at: Instant | None = Field(None, description="when the fact stops being true; past it, out of reads")
    categories: list[Category] = Field(default_factory=list, max_length=20,
                                       description="short labels, stored as given")
    metadata: FactMetadataIn = Field(default_factory=dict, description="values of the agent's filterable metadata "
                                                                       "keys, as a message's metadata gives them")


class ReflectionAdd(_In):
    content: text(2000, min_length=1)
    session_id: Id | None = Field(None, description="a session's buffer instead of the agent's (agent route only)")


class ImportReject(BaseModel):
    line: int = Field(description="the line's number in the body, from 1")
    field: str = Field(description="the field as the line spells it (history[0].content), or line")
    why: str


class ImportSkip(BaseModel):
    line: int = Field(description="the line's number in the body, from 1")
    why: str


class ImportReport(BaseModel):
    agent_id: str
    added: int = Field(description="lines whose item was stored")
    updated: int = Field(description="fact lines whose key was stored with another text, categories, expiry or "
                                     "metadata: the fact now says the line (a new version, with history)")
    unchanged: int = Field(description="lines whose key holds what they say already, or said it before "
                                       "(importing again changes nothing)")
    exists: int = Field(description="lines whose text another item of the scope holds")
    skipped: int = Field(description="export lines that hold no memory (message, run_cost), and fact lines whose "
                                     "key holds a retired fact (an import brings none back)")
    rejected: int
    added_by_kind: dict[str, int]
    rejects: list[ImportReject] = Field(description="the first 1,000 rejected lines, in order")
    skips: list[ImportSkip] = Field(description="the first 1,000 fact lines skipped because the fact under their "
                                                "key is retired, in order, with why")
