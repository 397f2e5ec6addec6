"""Forgetting one user (design §9 ``forget-user``, §11 "Provenance and erasure"): plan,
execute, verify. The entry points of every caller (``memoryctl forget-user``, an HTTP API);
each reads only what rests on the user, through the store's provenance queries, never a dump.

1. ``Store.forget_user`` deletes the user's own scope, their messages, the whole of every
   one-to-one session they were the only human of, run records and rejected events that name
   them, caches, and their id in session user lists (``pipeline.erasure.forget_plan``). What
   the deleted runs spent stays as anonymous usage records: cost totals never fall.
2. ``pipeline.erasure.plan`` finds, by provenance, every fact and reflection in any scope
   formed from the user's messages, and the blobs that absorbed such a reflection. Under the
   consolidation leases of those scope keys (no merge runs meanwhile), each blob is merged
   again from its remaining absorbed reflections (``pipeline.formation.rebuild``, the LLM
   port); then ``Store.erase_memory`` deletes the items and the blobs with nothing left. A
   failure before that deletes nothing of the plan: forgetting again finishes it. A second look
   removes what a stage applied meanwhile (one that checked its run just before step 1 ended it).

``verify_erasure`` then reports what still names the user (``Store.footprint``) or rests on
them by provenance, apart from what carries no attribution at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pipeline import erasure
from pipeline.clock import Clock
from pipeline.errors import InvalidInput
from pipeline.footprint import Resting
from pipeline.store.port import (
    AccessStore, AdminStore, BlobStore, IngestStore, ProvenanceStore, RunStore, SessionStore, Store, WebhookStore,
)
from pipeline.webhooks.outbox import announce_forgotten
from schemas.documents import StoredMessage, scope_key
from schemas.settings import Settings, get_settings

Progress = Callable[[str], None]


@dataclass
class ForgetResult:
    """What an erasure removed: documents per collection (``Store.forget_user``), and the
    provenance counts (``pipeline.erasure.Plan.counts``)."""

    user_id: str
    agent_id: str | None
    counts: dict[str, int]
    unattributed: list[str] = field(default_factory=list)  # items left: no attribution at all
    blob_keys: list[tuple[str, str]] = field(default_factory=list)  # blobs rebuilt or deleted


@dataclass
class Verification:
    """What is left of a user after an erasure. ``traces``: attributed to them (an erasure
    that left one failed). ``unattributed``: items and blob text with no attribution at all
    (stores formed before provenance, v1 shard text): nobody can tell whose they are."""

    traces: list[str]
    unattributed: list[str]

    def passed(self, *, strict: bool = False) -> bool:
        return not self.traces and not (strict and self.unattributed)


def check_ids(user_id: str, agent_id: str | None) -> None:
    """``InvalidInput`` for an empty user id, or an agent id given empty."""
    if not user_id or not user_id.strip():
        raise InvalidInput("user", "a user id is required")
    if agent_id is not None and not agent_id.strip():
        raise InvalidInput("agent", "an empty agent id; use --all-agents to erase under every agent")


class ErasureReads(Protocol):
    """What planning and verifying an erasure read: what rests on the user, the blobs of the
    scopes it touches and the ids of the reflections they absorbed (provenance), and the
    messages of the runs that formed them."""

    provenance: ProvenanceStore
    blobs: BlobStore
    ingest: IngestStore
    runs: RunStore


class PreviewReads(ErasureReads, Protocol):
    """What a preview of an erasure counts beside its plan: the user's own data (admin), their
    memory switches (access) and the webhook notices about them."""

    admin: AdminStore
    access: AccessStore
    webhooks: WebhookStore


def of_unknown_origin(store: ErasureReads, agent_id: str | None) -> Resting:
    """The items of unknown origin: with no source user, and not written by a person (an
    owner's direct write rests on nobody's messages by design: its ``source`` says so)."""
    loose = store.provenance.unattributed(agent_id)
    return Resting(facts=[f for f in loose.facts if f.source is None],
                   reflections=[r for r in loose.reflections if r.source is None])


def _run_messages(store: SessionStore, items: Resting) -> dict[str, list[StoredMessage]]:
    """run id -> its range's messages, for the items stored without sources whose run is kept."""
    out: dict[str, list[StoredMessage]] = {}
    for item in [*items.facts, *items.reflections]:
        run_id = item.source_run_id
        if item.source_user_ids or not run_id or run_id in out:
            continue
        run = store.runs.get_run(run_id)
        out[run_id] = store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to) if run else []
    return out


def plan_erasure(store: ErasureReads, user_id: str, agent_id: str | None = None,
                 run_messages: dict[str, list[StoredMessage]] | None = None,
                 solo_keys: Iterable[tuple[str, str]] = ()) -> erasure.Plan:
    """What erasing ``user_id`` would remove by provenance, changing nothing, outside what
    ``Store.forget_user`` removes whole (their scope, and ``solo_keys``: their one-to-one
    sessions' keys)."""
    check_ids(user_id, agent_id)
    resting, loose = store.provenance.resting_on(user_id, agent_id), of_unknown_origin(store, agent_id)
    runs = run_messages if run_messages is not None else _run_messages(store, loose)
    found = erasure.plan(user_id, resting, loose, runs, solo_keys)
    keys = sorted(found.blob_keys)
    return erasure.plan_blobs(found, {k: store.blobs.get_blob(*k) for k in keys},
                              {k: store.provenance.reflection_ids(*k, absorbed_only=True) for k in keys})


@dataclass
class Preview:
    """What ``forget_user`` would do: ``counts`` as its ``ForgetResult.counts`` will read, and
    the provenance plan (the blobs merged again or deleted)."""

    counts: dict[str, int]
    plan: erasure.Plan


def preview_forget(store: PreviewReads, user_id: str, agent_id: str | None = None) -> Preview:
    """What ``forget_user`` would report, changing nothing: the plan an operator (or the
    inspector) reads first, counted as the erasure counts (its store part is
    ``Store.forget_user`` run dry; its provenance part leaves to it the scopes it removes whole)."""
    check_ids(user_id, agent_id)
    counts = store.admin.forget_user(user_id, agent_id, dry_run=True)
    counts["user_switches"] = store.access.forget_user_switches(user_id, agent_id, dry_run=True)
    counts["webhook_deliveries"] = store.webhooks.forget_deliveries(user_id, agent_id, dry_run=True)
    scope_wide = erasure.forget_plan(user_id, agent_id, store.admin.user_data(user_id, agent_id))
    solo = {(agent, scope_key("session", session_id=sid)) for sid, agent in scope_wide.solo.items()}
    found = plan_erasure(store, user_id, agent_id, solo_keys=solo)
    return Preview({**counts, **found.counts()}, found)


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
    settings: Settings | None = None, llm=None, clock: Clock | None = None, progress: Progress | None = None,
) -> ForgetResult:
    """Delete everything of ``user_id`` under ``agent_id`` (None: every agent), and every item
    in any scope that rests on them; blobs that absorbed one are rebuilt through ``llm``
    (default: the one ``settings`` name, opened only if a blob needs it). ``progress`` hears
    one line per step."""
    check_ids(user_id, agent_id)
    from pipeline.formation.rebuild import holding, rebuild_blob

    say = progress or (lambda line: None)
    say("reading what rests on the user")
    before = store.provenance.resting_on(user_id, agent_id)
    loose = of_unknown_origin(store, agent_id)
    runs = _run_messages(store, loose)  # read before step 1 deletes the user's runs
    say("deleting the user's own data")
    counts = store.admin.forget_user(user_id, agent_id)
    counts["user_switches"] = store.access.forget_user_switches(user_id, agent_id)  # their memory switches go too
    # webhook notices about them, sent or not: none is sent later, none kept
    counts["webhook_deliveries"] = store.webhooks.forget_deliveries(user_id, agent_id)
    deps = _RebuildDeps(store, settings or get_settings(), llm, clock or Clock())
    holder = erasure.holder(user_id)
    keys = erasure.plan(user_id, before, loose, runs).lease_keys()
    found: dict[str, int] = {}
    plan = erasure.Plan()
    touched: set[tuple[str, str]] = set()
    with holding(deps, keys, holder):
        # The second look: a stage that saw its run still active just before ``forget_user``
        # ended it applies its effects a moment later.
        for look in range(2):
            plan = plan_erasure(store, user_id, agent_id, runs)
            for i, target in enumerate(plan.rebuild, 1):
                say(f"rebuilding blob {i}/{len(plan.rebuild)} ({target.scope_key})")
                rebuild_blob(deps, target, holder)
            store.admin.erase_memory(plan)
            touched |= plan.blob_keys
            found = {k: v + (found.get(k, 0) if k != "unattributed" else 0) for k, v in plan.counts().items()}
    agents = {agent_id} if agent_id else {i.agent_id for i in (*before.facts, *before.reflections)}
    _drop_segment_files(deps.settings, agents)
    announce_forgotten(store.webhooks, user_id, agents, deps.clock.now())
    return ForgetResult(user_id, agent_id, {**counts, **found}, list(plan.unattributed_items), sorted(touched))


def _drop_segment_files(settings: Settings, agent_ids: Iterable[str]) -> None:
    """Search segments written as files (``MEMORY_SEARCH_SEGMENT_DIR``) hold the erased facts'
    text and vectors: they go with the erasure, not at the agent's next search."""
    if settings.search_segment_dir:
        from pipeline.search.segment_files import SegmentFiles

        files = SegmentFiles(settings.search_segment_dir)
        for agent_id in agent_ids:
            files.drop_agent(agent_id)


def verify_erasure(store: ErasureReads, user_id: str, agent_id: str | None = None, *,
                   blob_keys: Iterable[tuple[str, str]] = ()) -> Verification:
    """What still names ``user_id`` under ``agent_id`` (None: any agent): id fields
    (``Store.footprint``), items resting on them by provenance, and among ``blob_keys`` (those
    an erasure rebuilt) a blob that still counts a removed reflection; and, apart, what has
    no attribution at all."""
    check_ids(user_id, agent_id)
    traces = store.provenance.footprint(user_id, agent_id).traces()
    loose = of_unknown_origin(store, agent_id)
    runs = _run_messages(store, loose)
    unattributed = []
    for kind, items in (("facts", loose.facts), ("reflections", loose.reflections)):
        for item in items:
            ident = item.fact_id if kind == "facts" else item.reflection_id
            found = erasure.attribute(item, runs)
            if found is None:
                unattributed.append(f"{kind}:{ident}")
            elif user_id in found:
                traces.append(f"{kind}:{ident}: its run's messages include the user's")
    for agent, key in sorted(set(blob_keys)):
        blob = store.blobs.get_blob(agent, key)
        present = set(store.provenance.reflection_ids(agent, key))
        missing = [r for r in (blob.absorbing_ids if blob else []) if r not in present]
        if missing:
            traces.append(f"consolidated:{agent}/{key}: counts {len(missing)} removed reflection(s)")
    unattributed += [f"consolidated:{b.agent_id}/{b.scope_key}: text of unknown origin"
                     for b in store.provenance.unexplained_blobs(agent_id)]
    return Verification(traces, unattributed)
