"""Forgetting a person (design §9 ``forget-user``, §12): the plan shown before, the erasure
itself, and the erasure checked at once (``usecases.verify``), as the CLI, the inspector and the
maintenance queue's jobs ask for them. Each reads only what rests on the user (the store's
provenance queries), never the whole store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline import forgetting
from pipeline.clock import Clock
from pipeline.store.port import Store
from schemas.access import subject_digest
from schemas.settings import Settings
from usecases.audit import Audited
from usecases.verify import verify


@dataclass(frozen=True)
class Erased:
    """What a forget removed (per collection and by provenance), the blobs it rewrote, what
    nobody can attribute, and, when checked at once, the traces still attributed to the user."""
    user_id: str
    agent_id: str | None
    counts: dict[str, int]
    blob_keys: list[tuple[str, str]]
    unattributed: list[str]
    traces: list[str] | None = None
    check: forgetting.Verification | None = field(default=None, repr=False)

    @property
    def audit(self) -> Audited:
        # traces left mean the erasure failed its own check: the entry says so
        return Audited("forget_user", self.agent_id, subject_digest(self.agent_id, self.user_id),
                       dict(sorted(self.counts.items())), "failed" if self.traces else "ok")


def plan(store: Store, user_id: str, agent_id: str | None) -> dict[str, Any]:
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


def forget_user(store: Store, user_id: str, agent_id: str | None = None, *, settings: Settings | None = None,
                llm=None, clock: Clock | None = None, progress=None, check: bool = False) -> Erased:
    """Everything of ``user_id`` under ``agent_id`` (None: every agent) goes, and their memory
    switches with it; with ``check``, then verified (``forget-user --verify``)."""
    result = forgetting.forget_user(store, user_id, agent_id, settings=settings, llm=llm, clock=clock,
                                    progress=progress)
    left = verify(store, user_id, agent_id, blob_keys=result.blob_keys) if check else None
    return Erased(user_id, agent_id, result.counts, list(result.blob_keys),
                  left.unattributed if left else result.unattributed, left.traces if left else None, left)
