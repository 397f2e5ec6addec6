"""The inspector's one door to erasure and export (design §9 ``forget-user``, §12): the plan
shown before a forget, the forget itself with its ``--verify`` check, and the export. The
erasure code is called here only (through ``ops.user_data`` and ``pipeline.forgetting``), so a
change there is a change in this module alone; like the CLI, it reads only what rests on the
user (the store's provenance queries), never the whole store.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ops import user_data
from pipeline import forgetting


def plan(store, user_id: str, agent_id: str | None) -> dict[str, Any]:
    """What a forget of ``user_id`` (under ``agent_id``, or every agent) would do, from the
    store as it is now, counted as the forget will count it (``forgetting.preview_forget``):
    what is deleted and what only rewritten, the items in any scope formed from their
    messages, and the blobs merged again or deleted."""
    found = forgetting.preview_forget(store, user_id, agent_id)
    return {
        "user_id": user_id, "agent_id": agent_id, "counts": dict(sorted(found.counts.items())),
        "rebuilt": sorted({(r.agent_id, r.scope_key) for r in found.plan.rebuild}),
        "dropped": sorted(set(found.plan.drop_blobs)),
    }


def forget(store, settings, user_id: str, agent_id: str | None) -> dict[str, Any]:
    """Erase now, then check that nothing attributed to the user is left (``forget-user
    --verify``); items nobody can attribute are listed apart."""
    result = forgetting.forget_user(store, user_id, agent_id, settings=settings)
    left = forgetting.verify_erasure(store, user_id, agent_id, blob_keys=result.blob_keys)
    return {"deleted": dict(sorted(result.counts.items())), "traces": left.traces, "unattributed": left.unattributed}


def export(store, user_id: str, agent_id: str | None) -> Iterator[str]:
    """Everything stored about the user, as JSON Lines."""
    return user_data.export_user(store, user_id, agent_id)
