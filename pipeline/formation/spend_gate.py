"""Spend caps at the start of each stage (design §13 "Operator controls").

``gate`` runs before a stage computes (``runner.run_stage``; a stage already done reuses its
output and spends nothing, so it passes): an agent over a hard cap raises ``SpendDeferred``,
and the task sends the stage again with a countdown until the window rolls or the cap is
raised. The run keeps its lease meanwhile (each new start renews it, and the countdown stays
under half of it), so the stale-run sweep never takes a waiting run for a stuck one; its
session's new events are ingested and stored as usual, and formed by this run's successors.

At a soft cap the premium stages (reflections, consolidation) use the fast model instead of the
tier model (``MEMORY_SPEND_SOFT_CAP_FAST_TIER``), recorded on the run (``premium_model``).
"""

from __future__ import annotations

from pipeline import caps, spend
from pipeline.errors import SpendDeferred
from schemas.documents import FormationRun, Stage

#: stages that make no model call whatever the run (finishing: totals, the next run)
_FREE = (Stage.FINISH,)


def gate(deps, run: FormationRun, stage: str) -> str:
    """The spend verdict for this stage of ``run`` (``ok`` | ``soft``); ``SpendDeferred`` when
    the agent is over a hard cap. Reaching a cap, or 80% of it, is announced on the way."""
    if stage in _FREE:
        return spend.OK
    now = deps.clock.now()
    found = caps.check(deps.store, deps.settings, run.agent_id, now)
    if found.verdict != spend.HARD:
        return found.verdict
    reached = [s for s in found.states if s.kind == "hard" and s.level == 100]
    named = ", ".join(f"{s.scope} {s.window} cap {s.cap_usd:.2f} USD (spent {s.spend_usd:.4f})" for s in reached)
    settings = deps.settings
    wait = min(spend.deferral_s(found.states, now), settings.claim_lease_s / 2, settings.broker_visibility_timeout_s / 2)
    raise SpendDeferred(f"agent {run.agent_id} is over its hard spend cap ({named}): {stage} waits until the "
                        "window rolls or the cap is raised", retry_after=max(wait, 1.0))


def premium_model(deps, run: FormationRun, stage: str, verdict: str, tier: str, fast: str) -> str:
    """The model a premium stage uses: the tier model, or at a soft cap the fast one (when
    ``spend_soft_cap_fast_tier``), the switch recorded in the run's ``models`` (``<stage>``: the
    model, ``<stage>_reason``: why)."""
    if verdict != spend.SOFT or not deps.settings.spend_soft_cap_fast_tier or tier == fast:
        return tier
    key = stage.split(":")[0]
    deps.store.runs.update_run_fields(run.run_id, models={
        **run.models, key: fast, f"{key}_reason": f"soft spend cap reached: {fast} instead of {tier}"})
    return fast
