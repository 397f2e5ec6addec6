"""The consolidate fan-out, one consolidate_scope per due scope key, and the session-end
consolidation that has no run (design §5.5). Plain functions; Celery lives in ``workers/``.

Fan-in is store-based, not a chord: each ``consolidate_scope`` completes its own stage record
(``consolidate_scope:<i>``, ``i`` the key's position in the due list, so no user id ever
becomes part of a field name), then ``scopes_done`` tells whoever sees every one done to send
``finish``. Two of them may both see it and both send it; ``finish`` is idempotent. This needs
no result backend, survives a worker crash (a redelivered task re-checks the records) and
leaves every scope's outcome on the run record.

Crash safety of one merge: the blob is saved (compare-and-set on its version) together with
``absorbing_ids`` and ``last_run_id``; only then are exactly those ids marked absorbed. A rerun
first completes a pending absorption, and a blob already written by the same holder is never
merged again. A failed merge changes nothing: the buffer stays.
"""

from __future__ import annotations

from datetime import datetime

from pipeline.errors import TransientError
from pipeline.formation import consolidation as rules
from pipeline.formation.outputs import (
    AlreadyMerged, ConsolidateOutput, Merged, NotDue, NothingToMerge, ScopeOutcome, Skipped, read,
)
from pipeline.formation.outputs import Screened as ScreenedCounts
from pipeline.formation.runner import Deps, Renewal, StageResult, Usage, load_run, record_spend, run_stage
from pipeline.formation.spend_gate import premium_model
from pipeline.formation.scopes import plan_scopes
from pipeline.formation.screening import Screened, guard_for, screen_blob
from pipeline.llm.models import tier_model
from pipeline.owner.instructions import guidance
from pipeline.prompts.consolidation import build_consolidation_request
from pipeline.webhooks import outbox
from schemas.documents import ConsolidatedBlob, FormationRun, Reflection, Stage, scope_stage


class ScopeBusy(TransientError):
    """Another consolidation holds this scope key's lease; try again later."""


def consolidate(run_id: str, deps: Deps) -> StageResult | None:
    """Which scope keys are due: over their threshold, or (session ended) holding a reflection
    of this session. Output ``due`` (ordered keys), ``session_end``, ``model``."""

    def compute(run: FormationRun, usage: Usage) -> ConsolidateOutput:
        store, settings = deps.store, deps.settings
        extracted = read(run, Stage.EXTRACT_FACTS)
        keys = list(extracted.plan.scope_plan().reflection_keys.values())
        counts = store.reflections.count_unabsorbed(run.agent_id, keys)
        thresholds = {s: settings.consolidation_threshold(s) for s in ("agent", "user", "session")}
        due = rules.due_by_threshold({k: counts.get(k, 0) for k in keys}, thresholds)
        session = store.ingest.get_session(run.session_id)
        ended = bool(session and session.ended_at is not None) or run.reason == "session_end"
        if ended:
            buffers = {k: store.reflections.unabsorbed_reflections(run.agent_id, k) for k in keys}
            due += rules.due_at_session_end(buffers, run.session_id)
        return ConsolidateOutput(due=rules.merge_order(due), session_end=ended, model=extracted.models.tier,
                                 unabsorbed=counts)

    return run_stage(deps, run_id, Stage.CONSOLIDATE, compute)


def pending_scopes(run: FormationRun) -> list[int]:
    """Indexes of due scope keys whose consolidate_scope stage is not done yet."""
    due = read(run, Stage.CONSOLIDATE).due
    done = {name for name, record in run.stages.items() if record.status == "done"}
    return [i for i in range(len(due)) if scope_stage(i) not in done]


def scopes_done(deps: Deps, run_id: str) -> bool:
    return not pending_scopes(load_run(deps.store.runs, run_id))


def consolidate_scope(run_id: str, index: int, deps: Deps) -> StageResult | None:
    """Merge one due scope key of the run, under its lease, with the run's tier model."""

    def compute(run: FormationRun, usage: Usage) -> ScopeOutcome:
        out = read(run, Stage.CONSOLIDATE)
        model = premium_model(deps, run, Stage.CONSOLIDATE_SCOPE, usage.spend, out.model,
                              read(run, Stage.EXTRACT_FACTS).models.fast)
        return _merge_scope(deps, run.agent_id, out.due[index], model=model, holder=run.run_id,
                            usage=usage, session_end=run.session_id if out.session_end else None)

    return run_stage(deps, run_id, scope_stage(index), compute)


def skip_scope(run_id: str, index: int, reason: str, deps: Deps) -> StageResult | None:
    """Give a scope up for this run (its lease stayed busy): the buffer stays for the next one."""
    return run_stage(deps, run_id, scope_stage(index), lambda run, usage: Skipped(status="skipped", reason=reason))


def merge_scope(
    deps: Deps, agent_id: str, key: str, *, model: str, holder: str, usage: Usage, session_end: str | None = None,
) -> dict:
    """One consolidation of one scope key, its outcome as JSON (``_merge_scope``)."""
    return _merge_scope(deps, agent_id, key, model=model, holder=holder, usage=usage,
                        session_end=session_end).model_dump(mode="json")


def _merge_scope(
    deps: Deps, agent_id: str, key: str, *, model: str, holder: str, usage: Usage, session_end: str | None = None,
) -> ScopeOutcome:
    """One consolidation of one scope key; idempotent for ``holder`` (a run id, or the
    session-end holder). Raises ``ScopeBusy`` when another holder has the lease.

    Whether the key is still due is decided again under the lease, on the buffer as it is
    then: a consolidation that waited while another merged the same key must not merge the
    few reflections left over. Due: the buffer reached the scope's threshold, or
    (``session_end``: the id of a session that ended) it holds a reflection of that session."""
    store, settings = deps.store, deps.settings
    lease = f"consolidate:{agent_id}:{key}"
    if not store.leases.acquire_lease(lease, holder, deps.clock.now(), settings.consolidation_lease_s):
        raise ScopeBusy(f"consolidation of {agent_id}/{key} is held by another worker", retry_after=1.0)

    # renewed before each model call: the lease outlives the merge's attempts
    renew_scope_lease = Renewal(
        lambda: store.leases.acquire_lease(lease, holder, deps.clock.now(), settings.consolidation_lease_s), deps.clock)
    usage.keepalive.append(renew_scope_lease)
    try:
        return _merge_under_lease(deps, agent_id, key, model=model, holder=holder, usage=usage,
                                  session_end=session_end)
    finally:
        usage.keepalive.remove(renew_scope_lease)
        store.leases.release_lease(lease, holder)


def _merge_under_lease(
    deps: Deps, agent_id: str, key: str, *, model: str, holder: str, usage: Usage, session_end: str | None,
) -> ScopeOutcome:
    """``_merge_scope`` once its lease is held: finish a crashed attempt, decide again whether
    the key is due, merge."""
    store, settings = deps.store, deps.settings
    now = deps.clock.now()
    blob = store.blobs.get_blob(agent_id, key)
    if blob is not None and blob.absorbing_ids:
        store.reflections.mark_absorbed(blob.absorbing_ids, blob.version, now)  # finish a crashed attempt
    if blob is not None and blob.last_run_id == holder:
        return AlreadyMerged(status="already_merged", scope_key=key, version=blob.version,
                             absorbed=len(blob.absorbing_ids))
    buffer = store.reflections.unabsorbed_reflections(agent_id, key)
    ids = rules.snapshot_ids(buffer)
    if not ids:
        return NothingToMerge(status="nothing_to_merge", scope_key=key, version=blob.version if blob else 0,
                              absorbed=0)
    scope = rules.scope_of_key(key)
    threshold = settings.consolidation_threshold(scope)  # type: ignore[arg-type]
    due = rules.due_by_threshold({key: len(ids)}, {scope: threshold})
    if session_end is not None:
        due += rules.due_at_session_end({key: buffer}, session_end)
    if not due:
        return NotDue(status="not_due", scope_key=key, version=blob.version if blob else 0,
                      absorbed=0, unabsorbed=len(ids), threshold=threshold)
    return _merge(deps, agent_id, key, blob, buffer, ids, model=model, holder=holder, usage=usage, now=now)


def _merge(
    deps: Deps, agent_id: str, key: str, blob: ConsolidatedBlob | None, buffer: list[Reflection], ids: list[str], *,
    model: str, holder: str, usage: Usage, now: datetime,
) -> Merged:
    """Merge the snapshot ``ids`` of the buffer into the blob, screen the answer, save the blob
    (compare-and-set on its version) with ``absorbing_ids``, then mark exactly those absorbed."""
    store, settings = deps.store, deps.settings
    scope = rules.scope_of_key(key)
    current, version = (blob.consolidated_content, blob.version) if blob else ("", 0)
    limit = settings.word_limit(scope)  # type: ignore[arg-type]
    texts = [r.content for r in buffer if r.reflection_id in set(ids)]
    owner = guidance(store.ingest.get_agent_settings(agent_id), "consolidation", [scope])
    merge = rules.merge_within_limit(
        deps.llm,
        lambda excess, missing: build_consolidation_request(
            scope, current, texts, word_limit=limit, model=model, excess_words=excess, missing_sections=missing,
            guidance=owner, edited_by_owner=bool(blob and blob.edited_by),
        ),
        version=version + 1, word_limit=limit, max_length_retries=settings.consolidation_max_length_retries,
        current_blob=current, usage=usage,
    )
    first = buffer[0]
    # the model's answer is screened like every write (design §11): a secret or, in agent
    # scope, contact data that reached the merge leaves with its line
    screened = Screened()
    content = screen_blob(merge.content, scope, guard=guard_for(settings), counts=screened,
                          people=[u for r in buffer for u in (*r.source_user_ids, r.user_id) if u])
    saved = store.blobs.save_blob(ConsolidatedBlob(
        agent_id=agent_id, scope=scope, scope_key=key, user_id=first.user_id, session_id=first.session_id,
        consolidated_content=content, word_limit=limit, version=version + 1,
        last_consolidated_at=now, absorbing_ids=ids, last_run_id=holder,
    ), expected_version=version)
    if not saved:
        raise TransientError(f"blob {agent_id}/{key} moved past version {version} during the merge")
    store.reflections.mark_absorbed(ids, version + 1, now)
    store.leases.bump_scope_versions(agent_id, [key])
    return Merged(status="merged", scope_key=key, version=version + 1, absorbed=len(ids),
                  words=merge.words, attempts=merge.attempts, over_limit_answers=merge.over_limit_answers,
                  lost_section_answers=merge.lost_section_answers, outdated_sections=merge.outdated_sections,
                  screened=ScreenedCounts(**screened.counts()))


def consolidate_session(agent_id: str, session_id: str, deps: Deps) -> list[dict]:
    """Session end with nothing left to form: merge every scope key holding an unabsorbed
    reflection of this session, with the session's tier model. Idempotent."""
    store = deps.store
    session = store.ingest.get_session(session_id)
    if session is None:
        return []
    plan = plan_scopes(store.ingest.get_agent_settings(agent_id), session_id, session.users, len(session.users) > 1,
                       store.access.user_memory_off(agent_id, session.users))
    keys = list(plan.reflection_keys.values())
    buffers = {k: store.reflections.unabsorbed_reflections(agent_id, k) for k in keys}
    model = tier_model(deps.settings, session.max_tier, session.preview)
    results = []
    usage = Usage()
    try:
        for key in rules.merge_order(rules.due_at_session_end(buffers, session_id)):
            results.append(merge_scope(deps, agent_id, key, model=model, holder=f"session_end:{session_id}",
                                       usage=usage, session_end=session_id))
    finally:
        # no run holds these calls: a usage record does, so the agent's cost counts them too,
        # those of an attempt that failed after its calls included
        record_spend(deps, usage, agent_id=agent_id, stage=Stage.CONSOLIDATE_SESSION, session_id=session_id)
    merged = [Merged.model_validate(r) for r in results if r.get("status") == "merged"]
    now = deps.clock.now()
    outbox.announce(store.webhooks, outbox.blob_events(store.webhooks, agent_id, merged, now), now)   # beat's sweep sends them
    return results
