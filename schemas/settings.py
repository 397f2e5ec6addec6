"""Every setting of the pipeline, with the defaults of SPEC §10, in one place.

All of them come from environment variables under the prefix ``MEMORY_`` (for example
``MEMORY_STORE_URL=sqlite:///memory.db``). Provider keys keep their usual names
(``OPENAI_API_KEY``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

Scope = Literal["agent", "user", "session"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMORY_", extra="ignore")

    # --- storage -------------------------------------------------------------------------
    store_url: str = "sqlite:///memory.db"
    collection_prefix: str = "memory2_"
    # Atlas Search / Vector Search are used when the store is Mongo and this is on.
    atlas_search: bool = False
    # How long a SQLite write waits for another process's lock before the task retries later.
    sqlite_busy_timeout_s: float = Field(default=60.0, gt=0)

    # --- broker --------------------------------------------------------------------------
    broker_url: str = "redis://localhost:6379/0"
    result_backend: str = "redis://localhost:6379/1"
    # Redis redelivers an unacked task after this; no countdown may be longer (STYLE).
    broker_visibility_timeout_s: int = 3600
    # Producer side: how long publishing may retry while the broker is unreachable.
    publish_retry_max: int = 3
    publish_timeout_s: float = 5.0

    # --- formation trigger (§4) ------------------------------------------------------------
    formation_message_interval: int = 45
    formation_token_interval: float = 1500
    min_messages_to_form: int = 4
    cold_after_s: int = 600
    sweep_interval_s: int = 600
    sweep_batch_size: int = 200
    claim_lease_s: int = 600
    max_run_attempts: int = 5
    # how often beat retries runs whose lease expired (and failed runs)
    retry_stale_interval_s: int = 120

    # --- ingest (§3) -----------------------------------------------------------------------
    max_message_bytes: int = 32 * 1024

    # --- global toggles (§1) ---------------------------------------------------------------
    always_in_context: bool = True
    facts_fifo: bool = True
    facts_dedup: bool = True
    rag: bool = True

    # --- facts -----------------------------------------------------------------------------
    facts_fifo_limit: int = 40
    facts_fifo_max_age_days: int = 7
    dedup_max_candidates: int = 5
    dedup_min_score: float = 0.7
    fact_word_limit: int = 30
    reflection_word_limit: int = 35

    # --- search (§6) -----------------------------------------------------------------------
    search_semantic_threshold: float = 0.65
    search_text_threshold: float = 1.5
    search_rrf_threshold: float = 0.015
    search_rrf_k: int = 60
    search_semantic_weight: float = 1.0
    search_text_weight: float = 1.0
    search_default_top_k: int = 10
    # BLAS threads of the local search's matrix-vector product (process-wide). 1 suits a busy
    # host and many concurrent searches; on an otherwise idle multi-core host, the core count
    # halves the latency of one search at 100k facts (see README, "Figures").
    search_blas_threads: int = Field(default=1, ge=1, le=64)
    # Per embedding model overrides of the above, e.g.
    # MEMORY_SEARCH_BY_MODEL='{"text-embedding-3-small": {"semantic": 0.6, "rrf_k": 40}}'
    # (keys: semantic, text, rrf, rrf_k, semantic_weight, text_weight).
    search_by_model: dict[str, dict[str, float]] = Field(default_factory=dict)

    # --- consolidation (§5.5) --------------------------------------------------------------
    consolidation_threshold_agent: int = 10
    consolidation_threshold_user: int = 4
    consolidation_threshold_session: int = 4
    word_limit_agent: int = 1200
    word_limit_user: int = 300
    word_limit_session: int = 200
    consolidation_lease_s: int = 300
    consolidation_max_length_retries: int = 2

    # --- read side -------------------------------------------------------------------------
    context_cache_ttl_s: int = 300

    # --- providers (§8) --------------------------------------------------------------------
    llm_provider: Literal["openai", "gemini", "offline"] | None = None
    embedding_provider: Literal["openai", "local", "hashing"] | None = None
    openai_base_url: str | None = None
    openai_fast_model: str = "gpt-5-mini"
    openai_free_model: str = "gpt-5-mini"
    openai_premium_model: str = "gpt-5.1"
    gemini_fast_model: str = "gemini-3-flash-preview"
    gemini_free_model: str = "gemini-3-flash-preview"
    gemini_premium_model: str = "gemini-3-pro-preview"
    openai_embedding_model: str = "text-embedding-3-small"
    llm_timeout_s: float = 60.0
    llm_max_concurrency: int = 16
    llm_invalid_answer_retries: int = 2
    hashing_embedding_dim: int = 384

    # --- task limits -----------------------------------------------------------------------
    task_soft_time_limit_s: int = 240
    task_time_limit_s: int = 300
    task_max_retries: int = 5
    task_retry_backoff_max_s: int = 300

    # --- provider keys (their usual names, not prefixed) -------------------------------------
    openai_api_key: str | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    gemini_api_key: str | None = Field(
        default_factory=lambda: os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"),
    )

    def consolidation_threshold(self, scope: Scope) -> int:
        return {
            "agent": self.consolidation_threshold_agent,
            "user": self.consolidation_threshold_user,
            "session": self.consolidation_threshold_session,
        }[scope]

    def word_limit(self, scope: Scope) -> int:
        return {
            "agent": self.word_limit_agent,
            "user": self.word_limit_user,
            "session": self.word_limit_session,
        }[scope]

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
        if self.embedding_provider:
            return self.embedding_provider
        return "openai" if self.openai_api_key else "local"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
