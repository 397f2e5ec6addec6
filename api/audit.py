"""The HTTP doors' half of the audit log (design §12): who asked comes from the caller's
credential; what was done comes from the use case's result (``usecases.audit``), written by
``usecases.audit.recorded``, never spelled out by a handler."""

from __future__ import annotations

from api.auth import Principal
from usecases.audit import R, Actor, recorded


def actor(caller: Principal) -> Actor:
    return Actor(caller.credential_id, caller.kind)


def audited(ctx, caller: Principal, result: R) -> R:
    """Record the audit entry ``result`` names, under ``caller``'s credential; ``result`` back."""
    return recorded(ctx.store.access, ctx.clock.now(), actor(caller), result)
