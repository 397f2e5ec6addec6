"""Stored documents (design §5, §7): what the store port reads and writes.

Every timestamp is timezone-aware UTC. Ids are opaque strings. A *scope key* is a computed,
never-NULL string that identifies one memory scope inside an agent: ``agent``,
``user:<user_id>`` or ``session:<session_id>``. Every unique key and every query also carries
the ``agent_id``, so ids that contain ``:`` cannot collide across scopes.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.context import ContextBlock
from schemas.metadata import labels as fact_labels
from schemas.owner import CategoryList, Instruction, Pause

Scope = Literal["agent", "user", "session"]
FactScope = Literal["agent", "user"]
# erased: a user or session of the run was erased while it ran; it applied nothing after that
RunStatus = Literal["claimed", "running", "done", "failed", "dead", "erased"]
ACTIVE_RUN_STATUSES = ("claimed", "running")
# never reopened: formed, or erased while in flight (its user's data is gone)
FINAL_RUN_STATUSES = ("done", "erased")


class Stage(StrEnum):
    """Every stage name: the keys of a run's ``stages`` and the ``stage`` of a usage record.
    The one source of these names (task names, run records, ``memoryctl runs`` and ``cost``)."""

    EXTRACT_FACTS = "extract_facts"
    EMBED_FACTS = "embed_facts"
    DECIDE_FACTS = "decide_facts"
    EXTRACT_REFLECTIONS = "extract_reflections"
    CONSOLIDATE = "consolidate"
    #: one per due scope key, recorded as ``consolidate_scope:<i>`` (``scope_stage``)
    CONSOLIDATE_SCOPE = "consolidate_scope"
    FINISH = "finish"
    #: usage records only (no run holds these calls): a session-end consolidation, an erasure's rebuild
    CONSOLIDATE_SESSION = "consolidate_session"
    REBUILD_BLOB = "rebuild_blob"


#: a run's chain, in order (the consolidate_scope fan-out runs between consolidate and finish)
STAGES: tuple[Stage, ...] = (
    Stage.EXTRACT_FACTS, Stage.EMBED_FACTS, Stage.DECIDE_FACTS, Stage.EXTRACT_REFLECTIONS, Stage.CONSOLIDATE,
    Stage.FINISH,
)


def scope_stage(index: int) -> str:
    """The record name of the consolidate_scope stage of the run's ``index``-th due scope key
    (its position, so that no user id ever becomes part of a field name)."""
    return f"{Stage.CONSOLIDATE_SCOPE}:{index}"


def stage_kind(name: str) -> Stage:
    """The stage of a record name (``consolidate_scope:<i>`` is a ``CONSOLIDATE_SCOPE``)."""
    return Stage(name.split(":", 1)[0])


def scope_key(scope: Scope, *, user_id: str | None = None, session_id: str | None = None) -> str:
    """The computed key of a scope inside one agent (never NULL, see design §7)."""
    if scope == "agent":
        return "agent"
    if scope == "user":
        if not user_id:
            raise ValueError("a user scope key needs user_id")
        return f"user:{user_id}"
    if not session_id:
        raise ValueError("a session scope key needs session_id")
    return f"session:{session_id}"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AgentSettings(_Doc):
    """Per-agent toggles (§1, §3). Unknown agents get these defaults."""

    agent_id: str
    name: str | None = None
    user_memory_enabled: bool = True
    agent_memory_enabled: bool = True
    updated_at: datetime | None = None
    # the owner's controls (design §13): every instruction version, and what is paused
    instructions: list[Instruction] = Field(default_factory=list)
    paused: list[Pause] = Field(default_factory=list)
    # every version of the agent's category list; none yet: the default list
    categories: list[CategoryList] = Field(default_factory=list)
    # the event metadata keys facts keep, and filters may name (``schemas.metadata``)
    metadata_keys: list[str] = Field(default_factory=list)


class StoredMessage(_Doc):
    agent_id: str
    session_id: str
    message_id: str
    event_id: str
    seq: int | None = None  # per-session ingest sequence number, assigned atomically
    role: str
    sender_id: str | None = None
    sender_name: str | None = None
    content: str
    created_at: datetime
    ingested_at: datetime
    weighted_tokens: float = 0.0
    session_users: list[str] = Field(default_factory=list)
    user_tier: int = 0
    preview: bool = False
    agent_name: str | None = None
    # the event's metadata as the producer gave it (``schemas.metadata``); facts keep the
    # agent's filterable keys of it
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionState(_Doc):
    """Trigger state of one session (§4), kept atomically by the store."""

    session_id: str
    agent_id: str
    last_seq: int = 0                 # highest ingest sequence number assigned
    claimed_through: int = 0          # highest seq owned by any run (active, done or dead)
    watermark: int = 0                # highest seq formed by a finished run
    messages_since: int = 0           # accepted messages after claimed_through
    tokens_since: float = 0.0         # their weighted tokens
    last_activity_at: datetime | None = None
    active_run_id: str | None = None  # the run that holds the session's claim, if any
    lease_expires_at: datetime | None = None
    users: list[str] = Field(default_factory=list)  # every human seen in the session
    max_tier: int = 0
    preview: bool = False
    ended_at: datetime | None = None  # set while ended; a message created later reopens it
    ended_history: list[datetime] = Field(default_factory=list)  # every end time, oldest first
    duplicates: int = 0               # duplicate events seen (counted, no effect)


class LLMUsage(_Doc):
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # calls per structured-output mode (json_schema, json_object, prompt): what the provider did
    structured_output: dict[str, int] = Field(default_factory=dict)
    # every call per model, embeddings included, priced when recorded (pipeline.cost):
    # {model: {kind, provider, calls, input_tokens, output_tokens, usd (None: unpriced), price}}
    by_model: dict[str, dict[str, Any]] = Field(default_factory=dict)


class StageRecord(_Doc):
    status: Literal["pending", "running", "done", "failed", "skipped"] = "pending"
    output: dict[str, Any] | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: float | None = None
    attempts: int = 0
    usage: LLMUsage = Field(default_factory=LLMUsage)
    error: str | None = None


class FormationRun(_Doc):
    """One triggered formation (§5): inputs, every stage's output, usage and errors."""

    run_id: str
    agent_id: str
    session_id: str
    seq_from: int
    seq_to: int
    reason: Literal["threshold", "cold", "session_end", "replay", "manual", "backfill"]
    status: RunStatus = "claimed"
    lease_expires_at: datetime | None = None
    attempts: int = 1
    created_at: datetime
    finished_at: datetime | None = None
    # inputs fixed at claim time / by the first stage
    user_ids: list[str] = Field(default_factory=list)
    group_chat: bool = False
    scopes_enabled: list[str] = Field(default_factory=list)
    #: a backfill run (design §13) forms these scope types only (of what the plan allows);
    #: [] for every other run: no restriction
    only_scopes: list[str] = Field(default_factory=list)
    models: dict[str, str] = Field(default_factory=dict)
    tier: int = 0
    stages: dict[str, StageRecord] = Field(default_factory=dict)
    error: str | None = None
    totals: dict[str, Any] = Field(default_factory=dict)
    # where an effect did something other than its decision (an UPDATE of a fact another run
    # retired meanwhile became an ADD, ...): [{"index", "fact_id", "note", ...}]
    effect_notes: list[dict[str, Any]] = Field(default_factory=list)
    # W3C trace context (traceparent, tracestate) the run was claimed under: every stage of the
    # run, redelivered or started later, joins that trace (pipeline.tracing)
    trace_context: dict[str, str] = Field(default_factory=dict)


class UsageRecord(_Doc):
    """Model calls no stage record holds, priced when recorded: a session-end consolidation
    (no run), or a stage attempt that failed after its calls (its record keeps no usage)."""

    usage_id: str
    agent_id: str
    session_id: str | None = None
    run_id: str | None = None
    stage: str                      # a Stage, e.g. "consolidate_session"
    at: datetime
    by_model: dict[str, dict[str, Any]] = Field(default_factory=dict)


class FactHistoryEntry(_Doc):
    """A version an UPDATE replaced: its text, and when it was valid (``valid_to`` is the
    replacing version's ``valid_from``). Entries stored before validity was kept have neither;
    ``pipeline.validity`` derives them from the change times."""

    content: str
    version: int
    changed_at: datetime              # when the UPDATE replaced it
    run_id: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class Fact(_Doc):
    fact_id: str
    agent_id: str
    scope: FactScope
    user_id: str | None = None
    scope_key: str
    content: str
    hash: str                          # normalized-text hash, unique per (agent, scope key)
    embedding: list[float] | None = None
    embedding_model: str | None = None
    source_session_id: str | None = None
    source_message_ids: list[str] = Field(default_factory=list)
    # provenance: the humans whose messages it came from (an UPDATE adds the new source's);
    # empty on a record stored before provenance (see ``pipeline.erasure`` for its rule)
    source_user_ids: list[str] = Field(default_factory=list)
    source_run_id: str | None = None
    # how it was written when no run formed it (design §13 "Direct writes and import"): "owner"
    # (an owner's direct write), "user" (a user's own), "import" (``memoryctl import``); None:
    # formed from messages by a run
    source: str | None = None
    # the source message as said (``Name: text``, one line): the text search reads it beside
    # the content, whose rewrite drops the words people used; None on records stored before
    source_text: str | None = None
    formed_at: datetime
    updated_at: datetime | None = None    # the latest change (formed_at until an UPDATE)
    # Validity (bitemporal): since when the current text is true as far as we know (its source
    # message's time), and until when (set when a later fact supersedes it; a retired fact
    # keeps it). Records stored before these existed get them from formed_at, updated_at and
    # retired_at when loaded.
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    version: int = 1
    history: list[FactHistoryEntry] = Field(default_factory=list)
    retired_at: datetime | None = None
    retired_by: str | None = None
    # why it was retired: "contradicted" (a DELETE), "expired" (``pipeline.expiry``); None on a
    # live fact and on one retired before reasons were kept
    retired_reason: str | None = None
    # past this time the fact is out of every read as if retired (design §13 "Expiry"), and
    # valid until then; None: no end foreseen
    expires_at: datetime | None = None
    # the agent's categories this fact is in (design §13 "Categories and metadata")
    categories: list[str] = Field(default_factory=list)
    # the filterable metadata of the messages it came from (``schemas.metadata.FactMetadata``)
    metadata: dict[str, Any] = Field(default_factory=dict)
    access_count: int = 0
    last_accessed_at: datetime | None = None

    @model_validator(mode="after")
    def _fill_times(self) -> "Fact":
        if self.valid_from is None:
            self.valid_from = self.updated_at or self.formed_at
        if self.updated_at is None:
            self.updated_at = self.formed_at
        if self.valid_to is None and self.retired_at is not None:
            self.valid_to = self.retired_at
        return self

    @property
    def changed_at(self) -> datetime:
        """The latest change: what <Facts> orders and ages by."""
        return self.updated_at or self.formed_at

    @property
    def search_text(self) -> str:
        """What the text branch of search analyses: the content, the texts it replaced (a
        corrected "lives in Lisbon" stays findable by "live") and the source message."""
        return "\n".join([self.content, *(h.content for h in self.history), *filter(None, [self.source_text])])

    @property
    def labels(self) -> list[str]:
        """Its categories and metadata pairs as the labels a filter matches (``schemas.metadata``)."""
        return fact_labels(self.categories, self.metadata)


class ReflectionEdit(_Doc):
    content: str           # the text before the edit
    changed_at: datetime
    changed_by: str        # the credential id (or "cli") that edited it


class Reflection(_Doc):
    reflection_id: str
    agent_id: str
    scope: Scope
    user_id: str | None = None
    session_id: str | None = None
    scope_key: str
    content: str
    source_session_id: str | None = None
    # provenance: the human messages of the run's range it was formed from, and their
    # senders (empty on a record stored before provenance, see ``pipeline.erasure``)
    source_message_ids: list[str] = Field(default_factory=list)
    source_user_ids: list[str] = Field(default_factory=list)
    source_run_id: str | None = None
    # as ``Fact.source``: "owner", "user" or "import" when no run formed it
    source: str | None = None
    formed_at: datetime
    absorbed: bool = False
    absorbed_at: datetime | None = None
    consolidated_into: int | None = None  # the blob version that absorbed it
    #: earlier texts, oldest first, when a person edited it before consolidation (design §13)
    history: list[ReflectionEdit] = Field(default_factory=list)


class ConsolidatedBlob(_Doc):
    agent_id: str
    scope: Scope
    scope_key: str
    user_id: str | None = None
    session_id: str | None = None
    consolidated_content: str = ""
    word_limit: int
    version: int = 0
    last_consolidated_at: datetime | None = None
    # the reflection ids merged into this version, and who merged them: a rerun after a crash
    # between saving the blob and marking them absorbed only marks them, never merges twice
    absorbing_ids: list[str] = Field(default_factory=list)
    last_run_id: str | None = None
    #: set on a version a person wrote (an owner's section edit, a replaced blob; design §13):
    #: their credential id, and when. The next consolidation keeps their lines unless newer
    #: memory contradicts them; it writes a version without these.
    edited_by: str | None = None
    edited_at: datetime | None = None


class RejectedEvent(_Doc):
    rejection_id: str
    event_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    raw: str                      # the raw payload, as received (JSON text or repr)
    errors: list[dict[str, str]]  # [{field, reason}]
    received_at: datetime


class CachedContext(_Doc):
    session_id: str
    user_id: str                  # "" when no user (never NULL in a key)
    agent_id: str
    #: the context as built (its XML is rendered from it); None: an entry written before the
    #: cache kept the model (it held the XML only), never served, built again
    content: ContextBlock | None = None
    built_at: datetime
    versions: dict[str, int] = Field(default_factory=dict)  # scope key -> stamp when built
    # the earliest expiry of a fact it shows: past it the block is stale (an expiry moves no stamp)
    stale_at: datetime | None = None
