"""Issuing a user-bound token (design §12), as a platform's backend does and ``memoryctl keys
token`` does: a JWT (HS256) naming one agent and one user, optionally one session, signed by
one of ``MEMORY_API_TOKEN_SECRETS`` named by ``kid``. The HTTP API verifies it
(``api.tokens``). Needs the ``api`` extra (PyJWT)."""

from __future__ import annotations

import secrets
import time

#: the only algorithm issued and accepted: ``alg: none`` and every other one are refused
ALGORITHM = "HS256"


def issue_user_token(secret: str, kid: str, *, agent_id: str, user_id: str, session_id: str | None = None,
                     lifetime_s: int = 3600, now: float | None = None) -> str:
    """A user-bound token, as a platform's backend makes one (``memoryctl keys token`` too)."""
    import jwt  # the api extra: imported when a token is issued, not with the layer

    issued = int(time.time() if now is None else now)
    claims = {"agent": agent_id, "user": user_id, "iat": issued, "exp": issued + int(lifetime_s),
              "jti": secrets.token_hex(12)}
    if session_id is not None:
        claims["session"] = session_id
    return jwt.encode(claims, secret, algorithm=ALGORITHM, headers={"kid": kid})
