"""Erasure of one user (design §9 ``forget-user``, §11 provenance), and the audit that proves it.

In this order:

1. ``Store.forget_user`` deletes the user's facts with their history, user reflections and
   blobs, the user's own messages, the whole of every one-to-one session they were the only
   human of (its messages, session memory, finished runs and caches), run records and rejected
   events that name them, context caches, and their id in session user lists. A run in flight
   of such a session ends ``erased`` (its stage then applies nothing); one of a group session is
   emptied and failed, to be formed again without them. In a group chat, other people's
   messages and the group's session memory stay.
2. ``pipeline.erasure.plan`` finds, by provenance, every fact and reflection in any scope
   (agent scope included) formed from the user's messages, and the blobs that absorbed such a
   reflection. Under the consolidation leases of those scope keys (no merge runs meanwhile),
   each blob is merged again from its remaining absorbed reflections
   (``pipeline.formation.rebuild``, the LLM port); then ``Store.erase_memory`` deletes the items
   and the blobs with nothing left. A failure before that deletes nothing of the plan: running
   ``forget-user`` again finishes it. A second look removes what a stage applied meanwhile
   (one that checked its run just before step 1 ended it).

``traces`` scans a full dump for any id field that still names the user, and for anything
that still rests on the user by provenance (``pipeline.erasure.provenance_traces``).
"""

from __future__ import annotations

from pipeline import erasure
from pipeline.clock import Clock
from pipeline.errors import InvalidInput
from pipeline.store.port import Store
from pipeline.user_ids import LEASE_PREFIX, id_paths, lease_names_user
from schemas.settings import Settings, get_settings


class _RebuildDeps:
    """What ``rebuild_blob`` needs; the LLM is opened only when a blob is rebuilt."""

    def __init__(self, store: Store, settings: Settings, llm, clock: Clock) -> None:
        self.store, self.settings, self.clock, self._llm = store, settings, clock, llm

    @property
    def llm(self):
        if self._llm is None:
            from pipeline.llm import open_llm

            self._llm = open_llm(self.settings)
        return self._llm


def forget_user(
    store: Store, user_id: str, agent_id: str | None = None, *,
    settings: Settings | None = None, llm=None, clock: Clock | None = None,
) -> dict[str, int]:
    """Delete everything of ``user_id`` under ``agent_id`` (None: every agent); counts per
    collection, and the provenance counts of ``pipeline.erasure.Plan.counts``. ``llm`` rebuilds
    the blobs (default: the one ``settings`` name, opened only if a blob needs it)."""
    if not user_id or not user_id.strip():
        raise InvalidInput("user", "a user id is required")
    if agent_id is not None and not agent_id.strip():
        raise InvalidInput("agent", "an empty agent id; use --all-agents to erase under every agent")
    from pipeline.formation.rebuild import holding, rebuild_blob

    before = store.dump_all()
    counts = store.forget_user(user_id, agent_id)
    deps = _RebuildDeps(store, settings or get_settings(), llm, clock or Clock())
    holder = erasure.holder(user_id)
    # which keys change, from what was stored before; then, with no merge of them running, the
    # plan of what is stored now (a merge may have absorbed a reflection meanwhile)
    keys = erasure.plan(user_id, before, agent_id).lease_keys()
    found: dict[str, int] = {}
    with holding(deps, keys, holder):
        # The second look: a stage that saw its run still active just before ``forget_user``
        # ended it applies its effects a moment later, possibly after the first look's dump.
        for _ in range(2):
            plan = erasure.plan(user_id, store.dump_all(), agent_id, before=before)
            for target in plan.rebuild:
                rebuild_blob(deps, target, holder)
            store.erase_memory(plan)
            found = {k: v + (found.get(k, 0) if k != "unattributed" else 0) for k, v in plan.counts().items()}
    return {**counts, **found}


def traces(dump: dict[str, list[dict]], user_id: str, agent_id: str | None = None) -> list[str]:
    """Where ``user_id`` is still named in a ``Store.dump_all()`` (under ``agent_id``, or any
    agent): ``collection[i].field`` paths of the id fields that hold it (``pipeline.user_ids``),
    never a match inside vectors or text; and every item that still rests on the user by
    provenance, or blob that counts a removed reflection (``pipeline.erasure``)."""
    found = erasure.provenance_traces(dump, user_id, agent_id)
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
