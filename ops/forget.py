"""Erasure of one user (SPEC §9 ``forget-user``), and the audit that proves it.

The store deletes (``Store.forget_user``): the user's facts with their history, user
reflections and blobs, the user's own messages, the whole of every one-to-one session they
were the only human of (its messages, session memory, runs and caches), run records and
rejected events that name them, context caches, and their id in session user lists. In a
group chat, other people's messages and the group's session memory stay. ``traces`` scans a
full dump for any id field that still names the user.
"""

from __future__ import annotations

from pipeline.errors import InvalidInput
from pipeline.store.port import Store
from pipeline.user_ids import LEASE_PREFIX, id_paths, lease_names_user


def forget_user(store: Store, user_id: str, agent_id: str | None = None) -> dict[str, int]:
    """Delete everything of ``user_id`` under ``agent_id`` (None: every agent); counts per
    collection."""
    if not user_id or not user_id.strip():
        raise InvalidInput("user", "a user id is required")
    if agent_id is not None and not agent_id.strip():
        raise InvalidInput("agent", "an empty agent id; use --all-agents to erase under every agent")
    return store.forget_user(user_id, agent_id)


def traces(dump: dict[str, list[dict]], user_id: str, agent_id: str | None = None) -> list[str]:
    """Where ``user_id`` is still named in a ``Store.dump_all()`` (under ``agent_id``, or any
    agent): ``collection[i].field`` paths of the id fields that hold it (``pipeline.user_ids``),
    never a match inside vectors or text."""
    found = []
    for collection, rows in dump.items():
        for i, row in enumerate(rows):
            if agent_id is not None and not _under(row, agent_id):
                continue
            found.extend(f"{collection}[{i}].{path}" for path in id_paths(row, user_id))
            name = row.get("name") or row.get("_id") if collection == "leases" else None
            if isinstance(name, str) and lease_names_user(name, user_id):
                found.append(f"{collection}[{i}]:{name}")
    return found


def _under(row: dict, agent_id: str) -> bool:
    """Whether a row belongs to ``agent_id`` (rows without an agent, like leases and some
    rejected events, are checked under every agent)."""
    owner = row.get("agent_id")
    name = row.get("name") or row.get("_id")
    if owner is None and isinstance(name, str) and name.startswith(LEASE_PREFIX):
        return name.startswith(f"{LEASE_PREFIX}{agent_id}:")
    return owner in (None, agent_id)
