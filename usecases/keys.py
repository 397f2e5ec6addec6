"""API keys (design §12, §13): admin keys reach every agent with every scope, agent keys one
agent with their scopes (by default ``read`` and ``publish``, the runtime's; ``curate`` for an
owner's controls). A key is 256 random bits, shown once, stored as its SHA-256 digest.

A key reads ``mk_<key id>_<secret>``: the key id is not secret (it names the key in audits,
listings and revocations), the whole string is what is digested and checked.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from usecases.audit import Actor, Audited, record
from pipeline.errors import InvalidInput
from pipeline.store.ports.access import AccessStore
from schemas.access import KEY_SCOPES, RUNTIME_SCOPES, ApiKey, KeyKind, key_digest

PREFIX = "mk_"


def create_key(access: AccessStore, kind: KeyKind, now: datetime, *, agent_id: str | None = None,
               label: str | None = None, by: str = "cli", scopes=None) -> tuple[str, ApiKey]:
    """A new key: (the secret, to show once; what is stored). Audited as ``key.create``.
    ``scopes`` (agent keys): among ``read``, ``publish``, ``curate``; default read and publish."""
    if kind == "agent" and not (agent_id and agent_id.strip()):
        raise InvalidInput("agent", "an agent key needs the agent it reaches")
    if kind == "admin" and agent_id:
        raise InvalidInput("agent", "an admin key reaches every agent; give no agent")
    if kind == "admin" and scopes is not None and set(scopes) != set(KEY_SCOPES):
        raise InvalidInput("scopes", "an admin key has every scope; give none")
    granted = list(KEY_SCOPES) if kind == "admin" else key_scopes(scopes)
    key_id = secrets.token_hex(8)
    secret = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"  # 32 bytes: 256 bits
    key = ApiKey(key_id=key_id, kind=kind, agent_id=agent_id, digest=key_digest(secret), label=label, created_at=now,
                 scopes=granted)
    access.put_api_key(key)
    record(access, now, _by(by), Audited("key.create", agent_id, key_id))
    return secret, key


def revoke_key(access: AccessStore, key_id: str, now: datetime, *, by: str = "cli") -> ApiKey:
    key = access.revoke_api_key(key_id, now)
    if key is None:
        raise InvalidInput("key", f"no key with id {key_id!r} (memoryctl keys list shows them)")
    record(access, now, _by(by), Audited("key.revoke", key.agent_id, key_id))
    return key


def _by(by: str) -> Actor:
    return Actor(by, "cli" if by == "cli" else "admin")


def key_scopes(scopes) -> list[str]:
    """The scopes asked for, checked and in their canonical order (default: the runtime's)."""
    if scopes is None:
        return list(RUNTIME_SCOPES)
    asked = [s.strip() for s in scopes if s.strip()]
    unknown = sorted(set(asked) - set(KEY_SCOPES))
    if unknown or not asked:
        raise InvalidInput("scopes", f"unknown scope {', '.join(unknown)}: choose among {', '.join(KEY_SCOPES)}"
                           if unknown else f"a key needs at least one scope among {', '.join(KEY_SCOPES)}")
    return [s for s in KEY_SCOPES if s in asked]
