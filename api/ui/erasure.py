"""The inspector's one door to erasure and export (design §9 ``forget-user``, §12): the plan
shown before a forget, the forget itself with its ``--verify`` audit, and the export. The
erasure code is called here only (through ``ops.user_data``, ``ops.forget`` and
``pipeline.erasure``), so a change there is a change in this module alone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ops import user_data
from pipeline import erasure


def plan(store, user_id: str, agent_id: str | None) -> dict[str, Any]:
    """What a forget of ``user_id`` (under ``agent_id``, or every agent) would remove, from
    the store as it is now: the documents that name them per collection, the items in any
    scope formed from their messages, and the blobs merged again or deleted."""
    dump = store.dump_all()
    named = Counter(json.loads(line)["collection"] for line in user_data.export_user(store, user_id, agent_id))
    found = erasure.plan(user_id, dump, agent_id)
    return {
        "user_id": user_id, "agent_id": agent_id,
        "documents": dict(sorted(named.items())),
        "by_source": found.counts(),
        "rebuilt": sorted({(r.agent_id, r.scope_key) for r in found.rebuild}),
        "dropped": sorted(set(found.drop_blobs)),
    }


def forget(store, settings, user_id: str, agent_id: str | None) -> dict[str, Any]:
    """Erase now, then audit the whole store for any trace left (``forget-user --verify``)."""
    from ops.forget import traces

    counts = user_data.forget_user(store, user_id, agent_id, settings=settings)
    left = traces(store.dump_all(), user_id, agent_id)
    return {"deleted": dict(sorted(counts.items())), "traces": left}


def export(store, user_id: str, agent_id: str | None) -> Iterator[str]:
    """Everything stored about the user, as JSON Lines."""
    return user_data.export_user(store, user_id, agent_id)
