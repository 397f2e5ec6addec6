"""finish: close a run and decide what comes next (design §4, §5.6).

- ``finish_run`` advances the session watermark, releases the claim and bumps the version
  stamps of every scope key the run changed; the run's totals are recorded with it.
- Then the trigger is checked again: messages that arrived during the run may already be due
  (threshold rule), and a session that ended meanwhile has its remainder claimed with the
  session-end rule, or, with nothing left to form, its leftover buffers consolidated.

Idempotent: the totals are stored as the stage's output before the run is closed, and a rerun
(redelivery after a crash) closes nothing twice; the re-check is itself atomic in the store.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipeline import cost, trigger
from pipeline.formation.outputs import (
    ActionCounts, DecideFactsOutput, Earlier, ExtractFactsOutput, ExtractReflectionsOutput, FactDrops, FinishOutput,
    Merged, ReflectionCounts, SameRunCounts, read_stored,
)
from pipeline.formation.runner import Deps, StageResult, Usage, load_run, run_stage
from pipeline.ingest import claim_run
from pipeline.webhooks import outbox
from schemas.documents import FormationRun, Stage, scope_stage, stage_kind


@dataclass(frozen=True)
class NextStep:
    """What the caller must send after finish: a new run, or a session consolidation."""

    run_id: str | None = None
    consolidate_session: tuple[str, str] | None = None  # (agent_id, session_id)
    deliveries: tuple[str, ...] = ()   # webhook deliveries the run announced, to send now


SCREENING_COUNTERS = ("secrets_dropped", "contacts_rescoped", "contacts_dropped")


def screening_totals(run: FormationRun) -> dict[str, int]:
    """What the run kept out of memory (design §11): secrets dropped from facts, fact updates,
    reflections and consolidated blobs; agent-scope items with contact data moved to the user's
    scope or dropped (lines of an agent blob: dropped)."""
    return _screening_totals(read_stored(run, Stage.EXTRACT_FACTS), read_stored(run, Stage.EXTRACT_REFLECTIONS),
                             read_stored(run, Stage.DECIDE_FACTS), _merged(run, read_stored))


def _merged(run: FormationRun, stored) -> list[Merged]:
    """The run's consolidations that merged (their blob's screen counted what it removed)."""
    outcomes = (stored(run, name) for name in run.stages if stage_kind(name) == Stage.CONSOLIDATE_SCOPE)
    return [o for o in outcomes if isinstance(o, Merged)]


def _screening_totals(
    extracted: ExtractFactsOutput | None, reflected: ExtractReflectionsOutput | None, decided: DecideFactsOutput | None,
    merged: list[Merged] = (),
) -> dict[str, int]:
    screened = [out.screened for out in (extracted, reflected, *merged) if out is not None]
    return {
        "secrets_dropped": sum(s.secrets_dropped for s in screened) + (decided.update_secrets if decided else 0),
        "contacts_rescoped": sum(s.contacts_rescoped for s in screened),
        "contacts_dropped": sum(s.contacts_dropped for s in screened) + (decided.update_contacts if decided else 0),
    }


EFFECT_NOTES = ("update_of_retired", "update_of_changed", "delete_of_retired", "delete_of_changed",
                "update_of_newer", "delete_of_newer")


def fact_counts(run: FormationRun, decided: dict[str, int]) -> dict[str, int]:
    """The decisions' counts as applied: an UPDATE of a fact another run retired or changed
    meanwhile was an ADD; a DELETE of one only added the new fact (``pipeline.formation.
    fact_effects``), each also counted under its note."""
    counts = dict(decided)
    for name in EFFECT_NOTES:
        counts[name] = sum(1 for n in run.effect_notes if n.get("note") == name)
    became_adds = counts["update_of_retired"] + counts["update_of_changed"]
    if became_adds and "updated" in counts:
        counts["updated"] -= became_adds
        counts["added"] = counts.get("added", 0) + became_adds
    if counts["update_of_newer"] and "updated" in counts:  # kept as a past version, not live
        counts["updated"] -= counts["update_of_newer"]
    if counts["delete_of_newer"] and "deleted" in counts:  # retired nothing: the stored text is newer
        counts["deleted"] -= counts["delete_of_newer"]
    return counts


def run_totals(run: FormationRun, earlier: Earlier | None = None) -> dict:
    """Tokens, calls, fact actions, reflections per scope, dropped items, what was kept out of
    memory (``screening_totals``) and timings."""
    stored = (earlier or Earlier()).stored
    tokens = {"input": 0, "output": 0, "embedding": 0}
    calls, timings = 0, {}
    for name, record in run.stages.items():
        calls += record.usage.calls
        tokens["input"] += record.usage.input_tokens
        tokens["output"] += record.usage.output_tokens
        # every embedding call: the new facts', the dedup candidates' and the UPDATE re-embeddings
        tokens["embedding"] += sum(r.get("input_tokens", 0) for r in record.usage.by_model.values()
                                   if r.get("kind") == "embedding")
        if record.duration_ms is not None:
            timings[name] = record.duration_ms
    # a stage not run (yet) counts nothing
    extracted = stored(run, Stage.EXTRACT_FACTS)
    decided = stored(run, Stage.DECIDE_FACTS)
    reflected = stored(run, Stage.EXTRACT_REFLECTIONS)
    consolidated = stored(run, Stage.CONSOLIDATE)
    drops = extracted.dropped if extracted else FactDrops()
    actions, same_run = (decided.counts, decided.same_run) if decided else (ActionCounts(), SameRunCounts())
    counts = reflected.counts if reflected else ReflectionCounts()
    merged = {}
    for i, key in enumerate(consolidated.due if consolidated else []):
        outcome = stored(run, scope_stage(i))
        merged[key] = outcome.status if outcome is not None else None
    return {
        "tokens": {**tokens, "total": tokens["input"] + tokens["output"]},
        "llm_calls": calls,
        "facts": {**fact_counts(run, actions.model_dump()),
                  "extracted": len(extracted.facts) if extracted else 0,
                  "same_run": same_run.model_dump()},
        "reflections": {"agent": counts.agent, "user": counts.user, "session": counts.session},
        "dropped_over_limit": {
            "facts": drops.over_limit,
            "reflections": counts.over_limit,
            "fact_updates": decided.update_over_limit if decided else 0,
        },
        "dropped_other": {
            "facts_scope_not_allowed": drops.scope_not_allowed,
            "reflections_scope_not_allowed": counts.scope_not_allowed,
            "reflections_repeating_facts": counts.repeats_fact,
        },
        **_screening_totals(extracted, reflected, decided, _merged(run, stored)),
        "consolidated": merged,
        "timings_ms": timings,
        "cost": cost.summary(record.usage.by_model for record in run.stages.values()),
    }


def changed_scope_keys(run: FormationRun, earlier: Earlier | None = None) -> list[str]:
    stored = (earlier or Earlier()).stored
    keys: set[str] = set()
    decided = stored(run, Stage.DECIDE_FACTS)
    keys.update(e.scope_key for e in (decided.effects if decided else []) if e.op != "retire")
    reflected = stored(run, Stage.EXTRACT_REFLECTIONS)
    keys.update(r.scope_key for r in (reflected.reflections if reflected else []))
    consolidated = stored(run, Stage.CONSOLIDATE)
    keys.update(consolidated.due if consolidated else [])
    return sorted(keys)


def finish(run_id: str, deps: Deps) -> tuple[StageResult | None, NextStep]:
    """Close the run (once) and return what to start next."""
    store = deps.store

    earlier = Earlier()
    announced: list[str] = []

    def compute(run: FormationRun, usage: Usage) -> FinishOutput:
        # ``run`` is as begin_stage left it: every earlier stage, and this one running
        return FinishOutput(totals=run_totals(run, earlier), changed=changed_scope_keys(run, earlier))

    def apply(run: FormationRun, output: FinishOutput) -> None:
        now = deps.clock.now()
        # announced before the run closes: a rerun after a crash between the two announces
        # again, and the deliveries' ids (event and subscription) queue nothing twice
        happened = outbox.run_events(store, run, earlier.stored(run, Stage.DECIDE_FACTS),
                                     _merged(run, earlier.stored), now)
        announced.extend(outbox.announce(store.webhooks, happened, now))
        store.runs.finish_run(run_id, now, output.totals, output.changed)

    result = run_stage(deps, run_id, Stage.FINISH, compute, apply)
    if result is None:  # not active: unknown (RunNotFound), or closed already, when a
        run = load_run(store.runs, run_id)  # redelivery only repeats the (atomic) re-check
        return None, next_step(deps, run) if run.status == "done" else NextStep()
    # next_step reads the session, agent and consolidate output, which closing did not change
    return result, replace(next_step(deps, result.run, earlier), deliveries=tuple(announced))


def next_step(deps: Deps, run: FormationRun, earlier: Earlier | None = None) -> NextStep:
    store, settings, now = deps.store, deps.settings, deps.clock.now()
    session = store.ingest.get_session(run.session_id)
    if session is None:
        return NextStep()
    ended = session.ended_at is not None
    rule = trigger.session_end_rule() if ended else trigger.threshold_rule(settings)
    if trigger.rule_holds(rule, session):
        reason = "session_end" if ended else "threshold"
        claimed = claim_run(store.runs, trigger.new_run(run.session_id, run.agent_id, reason, now), rule, now,
                            settings.claim_lease_s, follow_up=True)
        if claimed is not None:
            return NextStep(run_id=claimed.run_id)
    consolidated = (earlier or Earlier()).stored(run, Stage.CONSOLIDATE)
    consolidated_at_end = bool(consolidated and consolidated.session_end)
    if ended and not consolidated_at_end and session.last_seq <= session.claimed_through:
        return NextStep(consolidate_session=(run.agent_id, run.session_id))
    return NextStep()
