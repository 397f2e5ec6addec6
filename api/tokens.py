"""User-bound tokens (design §12): a JWT signed by the platform's secret (HS256), naming one
agent and one user, optionally one session, with an expiry under a maximum lifetime.

The header's ``kid`` names the secret (``MEMORY_API_TOKEN_SECRETS``), so a secret can be
rotated: both are accepted while the old one's tokens live out. Only HS256 is accepted;
``alg: none`` and every other algorithm are refused before any key is looked at.

A platform in another language signs the same claims with its own JWT library:

    header  {"alg": "HS256", "typ": "JWT", "kid": "2026-11"}
    claims  {"agent": "agent-1", "user": "alice", "session": "s-42" (optional),
             "iat": 1790000000, "exp": 1790003600, "jti": "<random id>" (optional)}
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass

import jwt

from usecases.tokens import ALGORITHM

_REQUIRED = ("agent", "user", "exp", "iat")
_ID_MAX = 128  # ids are opaque strings up to 128 characters (design §3)


class TokenRefused(Exception):
    """A token that is not valid here; the message says why (never echoing the token)."""


@dataclass(frozen=True)
class TokenClaims:
    token_id: str
    agent_id: str
    user_id: str
    session_id: str | None
    expires_at: int


class TokenVerifier:
    """Checks user-bound tokens against the configured secrets (kid -> secret)."""

    def __init__(self, secrets_by_kid: Mapping[str, str], *, max_lifetime_s: int, leeway_s: int = 30,
                 clock=time.time) -> None:
        self._secrets = dict(secrets_by_kid)
        self.max_lifetime_s = max_lifetime_s
        self.leeway_s = leeway_s
        self._clock = clock

    def verify(self, token: str) -> TokenClaims:
        if not self._secrets:
            raise TokenRefused("user tokens are not accepted here (no MEMORY_API_TOKEN_SECRETS)")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise TokenRefused("not a JWT") from None
        if header.get("alg") != ALGORITHM:
            raise TokenRefused(f"algorithm {str(header.get('alg'))[:16]!r} is refused; tokens are signed with HS256")
        kid = header.get("kid")
        secret = self._secrets.get(kid) if isinstance(kid, str) else None
        if secret is None:
            raise TokenRefused("unknown or missing key id (kid)")
        try:
            claims = jwt.decode(
                token, secret, algorithms=[ALGORITHM], leeway=self.leeway_s,
                options={"require": list(_REQUIRED), "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("not valid yet") from None
        except jwt.MissingRequiredClaimError as exc:
            raise TokenRefused(f"claim {exc.claim!r} is missing") from None
        except jwt.InvalidTokenError as exc:
            raise TokenRefused(_reason(exc)) from None
        return self._claims(token, claims)

    def _claims(self, token: str, claims: dict) -> TokenClaims:
        iat, exp = claims["iat"], claims["exp"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (iat, exp)):
            raise TokenRefused("iat and exp must be whole seconds")
        if iat > self._clock() + self.leeway_s:
            raise TokenRefused("issued in the future (iat)")
        if exp - iat > self.max_lifetime_s:
            raise TokenRefused(f"lives longer than the maximum of {self.max_lifetime_s} s (exp - iat)")
        for claim in ("agent", "user", "session"):
            value = claims.get(claim)
            if claim == "session" and value is None:
                continue
            if not isinstance(value, str) or not value.strip() or len(value) > _ID_MAX:
                raise TokenRefused(f"claim {claim!r} must be a non-empty id of at most {_ID_MAX} characters")
        jti = claims.get("jti")
        token_id = f"tok_{jti}" if isinstance(jti, str) and 0 < len(jti) <= _ID_MAX else (
            "tok_" + hashlib.sha256(token.encode()).hexdigest()[:24])
        return TokenClaims(token_id, claims["agent"], claims["user"], claims.get("session"), exp)


def _reason(exc: jwt.InvalidTokenError) -> str:
    if isinstance(exc, jwt.InvalidSignatureError):
        return "bad signature"
    if isinstance(exc, jwt.DecodeError):
        return "not a well-formed JWT"
    return type(exc).__name__
