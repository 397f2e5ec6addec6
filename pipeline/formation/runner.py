"""How every formation stage runs, idempotently (design §5).

``run_stage`` is the one shape of a stage:

1. renew the run's lease and ``start_stage`` (one ``Store.begin_stage``); if the run is no
   longer active (taken over, finished, dead) stop quietly and apply nothing;
2. a stage already ``done`` reuses its stored output (no LLM call);
3. otherwise, once the spend caps allow (``spend_gate``), ``compute`` (LLM / embedder calls) and ``complete_stage`` with the output, the
   token usage and the timings. The output is the stage's model
   (``pipeline.formation.outputs``), stored as its JSON dump; it is stored *before* any
   effect, so a rerun never asks the LLM again for a decision that may already be half applied;
4. ``apply`` the output's effects. Every effect is idempotent on the run id (deterministic
   fact and reflection ids, ``update_fact``/``retire_fact`` once per run), so a redelivery
   after a crash at any point applies nothing twice.

How a stage's failure is written on its run is decided here too (``guard_stage``), by the
error's type; whether it is then retried is the task's retry policy (``workers.base``).

Erasure (design §11): ``forget-user`` ends a run in flight of an erased user's one-to-one
session as ``erased`` (and empties and fails one of a group session). The stage reads the
run's status again after ``compute`` and before storing the output or applying anything: a run
that is no longer active stores nothing and applies nothing, and the chain stops. ``forget-user``
ends the runs before it reads what to remove, so an effect applied just before that check is
still found and removed by provenance.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from pipeline import tracing
from pipeline.clock import Clock
from pipeline.cost import OFFLINE_PROVIDERS, price_models
from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.formation import outputs, spend_gate
from pipeline.errors import LeaseLost, PermanentError, StoreUnavailable, TransientError
from pipeline.llm.port import LLM, LLMResponse
from pipeline.search.port import FactSearch
from pipeline.store.port import RunStore, Store
from pipeline.webhooks.outbox import announce_run_failed
from schemas.documents import FormationRun, LLMUsage, StageRecord, UsageRecord
from schemas.settings import LEASE_RENEWAL_SLACK_S, Settings


log = logging.getLogger("memory.formation")


class Deps(Protocol):
    """What a stage needs; ``workers.deps.Deps`` is one, tests build their own."""

    settings: Settings
    store: Store
    llm: LLM
    embedder: Embedder
    search: FactSearch
    clock: Clock


class RunNotFound(PermanentError):
    """A task names a run the store does not hold."""


class Renewal:
    """One lease, renewed before a network call unless it was renewed within the last
    ``LEASE_RENEWAL_SLACK_S`` (by the stage's start or the call before): a call that follows
    at once costs no store write, and the lease still outlives the call, since the settings
    keep every lease above one call's bound plus that slack (``Settings._calls_fit_leases``)."""

    def __init__(self, renew_lease: Callable[[], bool], clock: Clock) -> None:
        self.renew_lease = renew_lease
        self.clock = clock
        self.renewed_at = clock.now()   # made when the lease was just taken or renewed

    def __call__(self) -> bool:
        now = self.clock.now()
        if (now - self.renewed_at).total_seconds() < LEASE_RENEWAL_SLACK_S:
            return True
        self.renewed_at = now
        return self.renew_lease()


@dataclass
class Usage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    structured_output: dict[str, int] = field(default_factory=dict)
    # leases renewed before every provider call, so a stage's lease outlives its work
    # however many calls it makes: each returns False once the lease was lost
    keepalive: list[Callable[[], bool]] = field(default_factory=list)
    # the spend-cap verdict this stage started under (``spend_gate.gate``): ok | soft
    spend: str = "ok"
    # every call per requested model, embeddings included: {model: {kind, provider, calls,
    # input_tokens, output_tokens[, snapshots]}}; what the cost is computed from. ``snapshots``
    # lists the versions the provider said answered (a dated snapshot of the model asked for)
    by_model: dict[str, dict] = field(default_factory=dict)

    def add(self, response: LLMResponse) -> LLMResponse:
        self.calls += 1
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        if response.structured_output:
            self.add_modes({response.structured_output: 1})
        self._count("llm", response.model, response.provider, response.input_tokens, response.output_tokens,
                    snapshot=response.snapshot)
        return response

    def complete(self, llm: LLM, request) -> LLMResponse:
        """One LLM call, its leases renewed first, traced (a GenAI span) and counted."""
        self.keep_alive(llm.provider)
        return self.add(tracing.complete(llm, request))

    def embed(self, embedder: Embedder, texts, purpose: str) -> Embeddings:
        """One embedding call, its leases renewed first, traced (a GenAI span) and counted."""
        self.keep_alive(embedder.provider)
        return self.add_embedding(tracing.embed(embedder, texts, purpose), embedder.provider)

    def keep_alive(self, provider: str) -> None:
        """Before a call to ``provider``: renew every lease of ``keepalive``; ``LeaseLost`` if
        one was taken over meanwhile (another holder works on it now: no more calls are paid
        for here). Each network call is bounded (``pipeline.llm.deadline``) and the settings keep
        that bound below both leases, so a lease renewed before a call outlives it. Providers
        answering in process (the offline rules, the local embedders) cost no store write."""
        if provider in OFFLINE_PROVIDERS:
            return
        for renew_lease in self.keepalive:
            if not renew_lease():
                raise LeaseLost("the lease of this work was taken over or the run ended; stopping before the "
                                "next model call")

    def add_embedding(self, result: Embeddings, provider: str) -> Embeddings:
        """Count an embedding call (it is not an LLM call: ``calls`` and the LLM tokens stay)."""
        self._count("embedding", result.model, provider, result.input_tokens, 0)
        return result

    def _count(self, kind: str, model: str, provider: str, input_tokens: int, output_tokens: int,
               calls: int = 1, snapshot: str = "") -> None:
        row = self.by_model.setdefault(model, {"kind": kind, "provider": provider, "calls": 0,
                                               "input_tokens": 0, "output_tokens": 0})
        row["calls"] += calls
        row["input_tokens"] += input_tokens
        row["output_tokens"] += output_tokens
        if snapshot and snapshot != model and snapshot not in row.setdefault("snapshots", []):
            row["snapshots"].append(snapshot)

    def add_counts(self, counts: dict[str, int], modes: dict[str, int] | None = None) -> None:
        self.calls += counts.get("calls", 0)
        self.input_tokens += counts.get("input_tokens", 0)
        self.output_tokens += counts.get("output_tokens", 0)
        self.add_modes(modes or {})

    def add_modes(self, modes: dict[str, int]) -> None:
        for mode, calls in modes.items():
            self.structured_output[mode] = self.structured_output.get(mode, 0) + calls

    def record(self, prices: dict[str, dict[str, float]] | None = None) -> LLMUsage:
        """The stage's usage, each model's cost priced now from ``prices`` (the settings' table)."""
        return LLMUsage(calls=self.calls, input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                        structured_output=dict(self.structured_output),
                        by_model=price_models(self.by_model, prices or {}))


@dataclass
class StageResult:
    run: FormationRun
    output: dict[str, Any]             # as stored (JSON)
    reused: bool                       # the stage was already done: stored output, no LLM call
    record: StageRecord | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    value: Any = None                  # ``output`` as the stage's model (``outputs``)


Compute = Callable[[FormationRun, Usage], BaseModel]
Apply = Callable[[FormationRun, Any], None]


def load_run(runs: RunStore, run_id: str) -> FormationRun:
    run = runs.get_run(run_id)
    if run is None:
        raise RunNotFound(f"formation run {run_id!r} does not exist")
    return run


def renew(deps: Deps, run_id: str) -> bool:
    """Extend the run's lease; False means the run was taken over or finished: stop quietly."""
    return deps.store.runs.renew_run_lease(run_id, deps.clock.now(), deps.settings.claim_lease_s)


def run_stage(
    deps: Deps, run_id: str, stage: str, compute: Compute, apply: Apply | None = None,
) -> StageResult | None:
    """Run one stage of one run (see the module docstring). None when the run is not active."""
    store = deps.store
    begun = store.runs.begin_stage(run_id, stage, deps.clock.now(), deps.settings.claim_lease_s)
    if begun is None:
        return None
    run, record = begun
    if record.status == "done":
        output = record.output or {}
        value = outputs.parse(stage, output)
        if apply is not None:
            apply(run, value)
        return StageResult(run, output, reused=True, record=record, value=value)
    verdict = spend_gate.gate(deps, run, stage)   # SpendDeferred over a hard cap: the stage waits
    started = time.perf_counter()
    usage = Usage(keepalive=[Renewal(lambda: renew(deps, run_id), deps.clock)], spend=verdict)
    try:
        value = compute(run, usage)
    except BaseException:
        keep_spent(deps, run, stage, usage)
        raise
    if not still_active(store.runs, run_id):
        keep_spent(deps, run, stage, usage)  # paid for, though nothing is stored
        return None  # erased (or taken over) while computing: store and apply nothing
    output = outputs.dump(value)
    done = StageRecord(
        status="done", output=output, started_at=record.started_at, finished_at=deps.clock.now(),
        duration_ms=round((time.perf_counter() - started) * 1000, 3), attempts=record.attempts,
        usage=usage.record(deps.settings.price_table()),
    )
    reused = False
    if not store.runs.complete_stage(run_id, stage, done):
        # a concurrent delivery completed it first: its output is the one that counts
        done = load_run(store.runs, run_id).stages[stage]
        output, reused = done.output or {}, True
        value = outputs.parse(stage, output)
    if apply is not None:
        if not still_active(store.runs, run_id):
            return None
        apply(run, value)
    return StageResult(run, output, reused=reused, record=done, value=value)


def still_active(runs: RunStore, run_id: str) -> bool:
    """Whether the run is still claimed or running: not erased, failed, finished or gone (its
    status alone is read, not the run and its stage outputs)."""
    return runs.run_status(run_id) in ("claimed", "running")


def keep_spent(deps: Deps, run: FormationRun, stage: str, usage: Usage) -> None:
    """The calls of an attempt that failed after making them (an answer over its word limit
    asked again until the attempts ran out, a store write that failed after the LLM answered)
    were paid for: a usage record keeps them, since no stage record will."""
    record_spend(deps, usage, agent_id=run.agent_id, stage=stage, session_id=run.session_id, run_id=run.run_id)


def record_spend(
    deps: Deps, usage: Usage, *, agent_id: str, stage: str, session_id: str | None = None, run_id: str | None = None,
) -> None:
    """Keep ``usage`` (priced now) as a usage record when no stage record holds it: calls made
    outside any run, or by a failed attempt. A failure to keep it is logged, never raised over
    the caller's own outcome."""
    if not usage.by_model:
        return
    try:
        deps.store.stats.record_usage(UsageRecord(
            usage_id=uuid.uuid4().hex, agent_id=agent_id, session_id=session_id, run_id=run_id,
            stage=stage, at=deps.clock.now(), by_model=usage.record(deps.settings.price_table()).by_model,
        ))
    except Exception as exc:  # noqa: BLE001 - logged; the caller's own error or result stands
        log.warning("%s of agent %s: the cost of its model calls was not recorded (%s: %s)",
                    stage, agent_id, type(exc).__name__, exc)


# ------------------------------------------------------------------ failures ---------------
def guard_stage(deps: Deps, run_id: str, stage: str, fn: Callable[[Deps], Any]) -> Any:
    """Run ``fn(deps)``, one stage of a run, and record on the run how it failed. Returns its
    result, or None when the chain stops here with nothing to retry:

    - a run that does not exist is logged (None);
    - a ``PermanentError`` kills the run at once with the reason (None);
    - a ``TransientError`` marks the stage ``failed`` and is raised again, for the retry policy;
    - ``StoreUnavailable`` is raised untouched: nothing is written to the store that is down;
    - anything else is a bug: the run is ``failed`` (the stale-run sweep retries it, bounded)
      and the error raised again.
    """
    try:
        return fn(deps)
    except StoreUnavailable:
        raise
    except RunNotFound as exc:
        log.error("%s: %s", stage, exc)
        return None
    except PermanentError as exc:
        fail_run(deps, run_id, stage, exc, dead=True)
        return None
    except TransientError as exc:
        fail_stage(deps, run_id, stage, exc)
        raise
    except Exception as exc:
        fail_run(deps, run_id, stage, exc, dead=False)
        raise


def fail_stage(deps: Deps, run_id: str, stage: str, exc: Exception) -> None:
    """Mark the stage ``failed`` with the error's type and message (a run gone meanwhile: nothing)."""
    try:
        deps.store.runs.fail_stage(run_id, stage, f"{type(exc).__name__}: {exc}", deps.clock.now())
    except KeyError:  # the run is gone; nothing to record
        pass


def fail_run(deps: Deps, run_id: str, stage: str, exc: Exception, *, dead: bool, retries: int | None = None) -> None:
    """End the run ``failed`` (the stale-run sweep reopens it, bounded) or ``dead`` (at once),
    the reason naming the stage, the error and the retries spent on it."""
    after = f" after {retries} retries" if retries is not None else ""
    reason = f"{stage}: {type(exc).__name__}{after}: {exc}"
    log.warning("run %s %s: %s", run_id, "dead" if dead else "failed", reason)
    fail_stage(deps, run_id, stage, exc)
    now = deps.clock.now()
    deps.store.runs.fail_run(run_id, reason, now, dead=dead)
    run = deps.store.runs.get_run(run_id)
    if run is not None and run.status in ("failed", "dead"):
        announce_run_failed(deps.store, run, now)   # beat's webhook sweep sends it
