"""Requests and responses of the HTTP API (design §12 "Interfaces"). The OpenAPI document is
generated from these models; ``tests/api/openapi.json`` pins it, so a change of shape is a
reviewed diff.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictInt, StringConstraints, Tag

from schemas.context import ContextFact, ContextSection
from schemas.events import Role
from schemas.hits import SearchHit
from schemas.metadata import EventMetadata, HeldMetadata
from schemas.values import Id, Instant, TextChars

Scope = Literal["agent", "user", "session"]

#: a search query: some text that is not only spaces
Query = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S"), TextChars]


def text(max_length: int, min_length: int | None = None):
    """Free text (``schemas.values``) of at most ``max_length`` characters."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length), TextChars]


class _In(BaseModel):
    """A request body: unknown fields refused; numbers and flags as JSON types (never "1" or
    false for a number: pydantic's lax mode would take them, the document does not)."""

    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """Every error: what went wrong, where (parameter, header, path or body field) and why."""

    what: str
    where: str
    why: str


# ------------------------------------------------------------------------ read side --------
class Omitted(BaseModel):
    blobs: int = 0
    relevant_facts: int = 0
    reflections: int = 0
    facts: int = 0


class MemoryContext(BaseModel):
    """The memory context as data: exactly what the XML block shows, section by section."""

    agent_id: str
    session_id: str
    user_id: str | None
    sections: dict[Scope, ContextSection]
    relevant_facts: list[ContextFact]
    facts: list[ContextFact]
    omitted: Omitted
    xml: str


#: one query, or a list of 1 to 3; the list or the text is judged as what it is, so an error
#: names the rule broken ("at most 3 items"), not "not a string" for a list that is too long
Queries = Annotated[Annotated[Query, Tag("str")] | Annotated[list[Query], Field(min_length=1, max_length=3), Tag("list")],
                    Discriminator(lambda v: "list" if isinstance(v, list) else "str")]


class SearchRequest(_In):
    query: Queries = Field(description="1 to 3 queries, searched in parallel")
    user_id: Id | None = Field(default=None, description="whose user-scope facts to include; with a user "
                                                         "token it is the token's user and may be left out")
    top_k: StrictInt = Field(default=10, ge=1, le=50)
    debug: StrictBool = False
    as_of: Instant | None = None
    categories: list[str] | None = Field(
        default=None, description="only facts filed under any of these categories of the agent (design §13)")
    metadata: dict[str, Any] | None = Field(
        default=None, description="only facts holding, for every key named (a filterable key of the agent), "
                                  "the value given or any of a list of values")


class SearchResponse(BaseModel):
    results: list[SearchHit]
    debug: dict[str, Any] | None = None


class MessageIn(_In):
    message_id: Id
    role: Role
    sender_id: Id | None = None
    sender_name: text(256) | None = None
    content: Annotated[str, TextChars]
    created_at: Instant | None = None
    # what the platform knows of the message (channel, project, ...); facts keep the keys the
    # agent's owner marks filterable (``schemas.metadata``)
    metadata: EventMetadata = Field(default_factory=dict)


class PublishRequest(_In):
    messages: list[MessageIn] = Field(min_length=1, max_length=500)
    session_users: list[Id] = Field(default_factory=list, max_length=1000)
    user_tier: StrictInt = Field(default=0, ge=0, le=100)
    preview: StrictBool = False
    agent_name: text(256) | None = None


class Published(BaseModel):
    published: int


class SessionStart(_In):
    user_ids: list[Id] = Field(default_factory=list, max_length=1000)


class Accepted(BaseModel):
    ok: bool = True


class ScopeStats(BaseModel):
    model_config = ConfigDict(extra="allow")

    scope: Scope


class Stats(BaseModel):
    agent_id: str
    scopes: dict[str, ScopeStats]
    # ``/status`` only: per limit of MEMORY_LLM_RATE_LIMITS, its rpm and tpm, the seconds until
    # its next turn, the calls deferred and the 429 holds so far (design §8)
    provider_limits: dict[str, dict[str, int | float | str]] | None = None


# ------------------------------------------------------------------------ users' own -------
class FactVersionOut(BaseModel):
    content: str
    version: int
    changed_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class Source(BaseModel):
    session_id: str | None
    message_ids: list[str]
    run_id: str | None
    written_by: str | None = Field(
        None, description="owner, user or import: how it was written when no run formed it from messages")


class MyFact(BaseModel):
    id: str
    scope: str
    content: str
    version: int
    formed_at: datetime
    updated_at: datetime | None
    editable: bool
    source: Source
    history: list[FactVersionOut]
    expires_at: datetime | None = None
    categories: list[str] = Field(default_factory=list, description="the agent's categories it is filed under")
    metadata: dict[str, Any] = Field(default_factory=dict, description="the agent's filterable metadata keys of the "
                                     "messages it came from: a value, or the list of values they disagreed on")


class ReflectionVersionOut(BaseModel):
    content: str
    changed_at: datetime


class MyReflection(BaseModel):
    id: str
    scope: str
    content: str
    formed_at: datetime
    absorbed: bool
    editable: bool
    source: Source
    history: list[ReflectionVersionOut] = Field(default_factory=list, description="earlier texts, oldest first")


class MyBlob(BaseModel):
    content: str
    version: int
    last_consolidated_at: datetime | None


class MySession(BaseModel):
    """The memory of one session whose only human is the user: its blob and the reflections
    waiting for consolidation (deletable by the user)."""

    session_id: str
    blob: MyBlob | None
    reflections: list[MyReflection]


class MyMemory(BaseModel):
    """What an agent keeps about one user: their user-scope facts, reflections and blob, the
    memory of their one-to-one sessions, and, read-only, the shared items that rest only on
    their messages."""

    agent_id: str
    user_id: str
    user_memory_enabled: bool
    facts: list[MyFact]
    reflections: list[MyReflection]
    blob: MyBlob | None
    shared_facts: list[MyFact]
    shared_reflections: list[MyReflection]
    sessions: list[MySession] = Field(default_factory=list)


class FactEdit(_In):
    content: text(2000, min_length=1)
    # merge-patch semantics (RFC 7396): a missing field keeps the fact's expiry, null removes it
    expires_at: Instant | None = Field(None, description="when the fact stops being true (in the future); "
                                                         "null: it no longer expires; omitted: unchanged")
    # the agent's categories it is in (design §13), each from the agent's list; omitted: the
    # fact's stay, []: none
    categories: list[str] | None = Field(None, max_length=50)
    # its filterable metadata (design §13), replacing the fact's: omitted keeps it, {} or null
    # takes every value off (null, as for expires_at)
    metadata: HeldMetadata | None = None

    @property
    def clears_expiry(self) -> bool:
        """The body sent ``"expires_at": null``: the fact no longer expires."""
        return "expires_at" in self.model_fields_set and self.expires_at is None

    @property
    def metadata_change(self) -> dict[str, Any] | None:
        """The fact's metadata from now on, or None to keep it (the field omitted)."""
        if "metadata" not in self.model_fields_set:
            return None
        return {} if self.metadata is None else self.metadata


class ReflectionEdit(_In):
    # a reflection waiting for consolidation has a text only: a fact's fields (expires_at,
    # categories, metadata) are refused as unknown rather than taken and dropped
    content: text(2000, min_length=1)


class Deleted(BaseModel):
    deleted: str
    kind: Literal["fact", "reflection"]


class Withdrawn(BaseModel):
    """A user's part taken out of a shared item, which stays for the others."""

    withdrawn: str
    kind: Literal["fact", "reflection"]
    messages_out: int   # of the user's messages out of its sources
    versions_out: int   # older texts that may have quoted them, gone


class UserMemorySwitch(_In):
    enabled: StrictBool


class UserMemorySetting(BaseModel):
    agent_id: str
    user_id: str
    enabled: bool


# ------------------------------------------------------------------------ admin ------------
class ForgetRequest(_In):
    user_id: Id
    agent_id: Id | None = Field(default=None, description="erase under this agent; none: every agent")


class JobOut(BaseModel):
    job_id: str
    kind: str
    status: Literal["queued", "running", "done", "failed"]
    agent_id: str | None
    created_at: datetime
    finished_at: datetime | None
    counts: dict[str, int]
    error: str | None


class ReplayRequest(_In):
    agent_id: Id | None = None
    run_ids: list[Id] | None = Field(default=None, max_length=1000)


class ReplayResult(BaseModel):
    replayed: list[str]
    skipped: list[dict[str, str]]


class RunsOut(BaseModel):
    runs: list[dict[str, Any]]


class CostOut(BaseModel):
    model_config = ConfigDict(extra="allow")


class AuditOut(BaseModel):
    at: datetime
    credential_id: str
    credential_kind: str
    action: str
    agent_id: str | None
    subject: str | None
    outcome: str
    counts: dict[str, int]


class AuditList(BaseModel):
    entries: list[AuditOut]


class Health(BaseModel):
    status: Literal["ok"]


#: the error answers every route may give, all in the ``Problem`` shape
ERRORS = {status: {"model": Problem, "description": why} for status, why in (
    (400, "the body cannot be read (not UTF-8 JSON)"),
    (401, "no credential, or one that is not valid"),
    (403, "the credential does not reach this"),
    (404, "no such item, route or job for this credential"),
    (413, "the request body is too large"),
    (422, "a parameter or the body is invalid"),
    (429, "this credential's rate limit is spent (Retry-After)"),
    (503, "the store, broker or rate-limit store is unavailable (Retry-After)"),
)}
