"""Settings of the HTTP API (``memoryctl serve``), from ``MEMORY_API_*`` variables.

Kept apart from ``schemas.settings``: workers never read them, and the API reads the pipeline's
own settings besides (store, broker, context budget).

    MEMORY_API_TOKEN_SECRETS='{"2026-11": "<at least 32 random bytes>"}'   # kid -> secret
    MEMORY_API_RATE_LIMIT_PER_MINUTE=600          # per credential, across every worker (Redis)
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: HS256 wants a key at least as long as its hash (RFC 7518 §3.2): 256 bits
MIN_SECRET_BYTES = 32


class ApiSettings(BaseSettings):
    # an empty variable (compose passes "" for an unset one) means the default
    model_config = SettingsConfigDict(env_prefix="MEMORY_API_", extra="ignore", env_ignore_empty=True)

    # Secrets that sign user-bound tokens, by key id (the token header's ``kid``): add the new
    # one, let platforms sign with it, then remove the old one once its tokens have expired.
    token_secrets: dict[str, SecretStr] = Field(default_factory=dict)
    # A token whose ``exp`` lies further than this after its ``iat`` is refused.
    token_max_lifetime_s: int = Field(default=3600, ge=60, le=30 * 24 * 3600)
    # Clock skew allowed between the platform that signs and this API.
    token_leeway_s: int = Field(default=30, ge=0, le=300)
    # Requests per minute per credential (key id or token id), counted in Redis so that the
    # limit holds across uvicorn workers and hosts; 0 switches the limit off.
    rate_limit_per_minute: int = Field(default=600, ge=0)
    # Redis of the rate limits; unset: the broker's (MEMORY_BROKER_URL).
    redis_url: str | None = None
    # Request bodies above this are refused with 413 before they are read whole.
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    # An import's body (``POST …/import``) is read as it streams, line by line, never whole:
    # it may be larger, up to this.
    import_max_bytes: int = Field(default=64 << 20, ge=1024)
    # Origins allowed by CORS; empty (the default) sends no CORS headers at all.
    cors_origins: list[str] = Field(default_factory=list)

    @field_validator("token_secrets")
    @classmethod
    def _long_enough(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for kid, secret in value.items():
            if not kid or len(kid) > 64:
                raise ValueError(f"key id {kid!r}: expected 1 to 64 characters")
            if len(secret.get_secret_value().encode()) < MIN_SECRET_BYTES:
                raise ValueError(f"the secret of key id {kid!r} is shorter than {MIN_SECRET_BYTES} bytes "
                                 "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(48))')")
        return value


@lru_cache(maxsize=1)
def get_api_settings() -> ApiSettings:
    """The process-wide API settings, read once from the environment."""
    return ApiSettings()
