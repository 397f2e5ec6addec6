"""Who is calling (design §12): the credential decides, never a parameter.

``Authorization: Bearer <credential>`` holds one of:
- an admin key (every agent) or an agent key (one agent: read any of its users, publish),
  ``mk_…``, checked by the SHA-256 digest of the whole string against the store;
- a user-bound token (JWT, ``api.tokens``): one user of one agent, optionally one session.

With an agent key the caller names user and session in the path or body (and, for MCP, in the
``X-Memory-User`` / ``X-Memory-Session`` connection headers set by the runtime's code); with a
user token they come from the token, and any other value is refused (``api.access``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from api.errors import Unauthenticated
from api.keys import looks_like_key
from api.tokens import TokenRefused, TokenVerifier
from pipeline.store.ports.access import AccessStore
from schemas.access import KEY_SCOPES, ApiKey, key_digest

USER_HEADER = "X-Memory-User"
SESSION_HEADER = "X-Memory-Session"
_MAX_CREDENTIAL = 4096


@dataclass(frozen=True)
class Principal:
    kind: Literal["admin", "agent", "user"]
    credential_id: str          # key id or token id; never the secret
    agent_id: str | None        # None only for admin
    user_id: str | None = None  # set for user-bound tokens
    session_id: str | None = None
    #: what the credential may do (design §13): an admin key all, an agent key its own scopes,
    #: a user token reads and publishes as its user
    scopes: frozenset[str] = frozenset({"read", "publish"})


class KeyLookup(Protocol):
    """The store, where the keys are (``access.find_api_key``)."""

    access: AccessStore


def authenticate(authorization_header: str | None, *, keys: KeyLookup, token_verifier: TokenVerifier) -> Principal:
    """The principal of an ``Authorization`` header; raises ``Unauthenticated`` (401) saying
    why, never echoing the credential."""
    if not authorization_header:
        raise Unauthenticated("no credential: send Authorization: Bearer <key or token>")
    scheme, _, credential = authorization_header.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise Unauthenticated("expected Authorization: Bearer <key or token>")
    if len(credential) > _MAX_CREDENTIAL:
        raise Unauthenticated("credential too long")
    if looks_like_key(credential):
        key = keys.access.find_api_key(key_digest(credential))
        if key is None:
            raise Unauthenticated("unknown key")
        if key.revoked_at is not None:
            raise Unauthenticated("revoked key")
        return Principal(kind=key.kind, credential_id=key.key_id, agent_id=key.agent_id,
                         scopes=frozenset(KEY_SCOPES if key.kind == "admin" else key.scopes))
    try:
        claims = token_verifier.verify(credential)
    except TokenRefused as exc:
        raise Unauthenticated(f"token refused: {exc}") from None
    return Principal(kind="user", credential_id=claims.token_id, agent_id=claims.agent_id,
                     user_id=claims.user_id, session_id=claims.session_id)


#: declares the scheme in the OpenAPI document; the header itself is read by ``authenticate``
_BEARER = HTTPBearer(auto_error=False, description="an API key (mk_...) or a user-bound token (JWT)")


async def caller(request: Request, _declared=Depends(_BEARER)) -> Principal:
    """The REST routes' dependency: the caller by its ``Authorization`` header (``admit``),
    with the bearer scheme declared in the OpenAPI document. Async on purpose: its two reads
    (one indexed key lookup, one Redis script) take tens to hundreds of microseconds, less
    than the hop to the thread pool that a sync dependency costs on every request."""
    request.state.principal = admit(request.app.state.ctx, request.headers.get("authorization"))
    return request.state.principal


def admit(ctx, authorization_header: str | None) -> Principal:
    """The one decision of who is calling, made for every door (REST, ``/mcp``, the inspector's
    session): the credential authenticated, then counted against its rate limit. Each door
    carries the credential its own way and presents a refusal its own way; none decides
    itself. Raises ``Unauthenticated`` (401), ``RateLimited`` (429), or 503 when the
    rate-limit store is unreachable."""
    found = authenticate(authorization_header, keys=ctx.store, token_verifier=ctx.token_verifier)
    ctx.rate_limiter.check(found.credential_id)
    return found
