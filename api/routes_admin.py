"""Operators' routes (admin keys), under ``/v1/admin``: runs, replay of failed runs, cost, spend caps, the
audit log, and a person's export and erasure under one agent or all. Jobs are polled at
``/v1/jobs/{job_id}`` by an admin, or by the user a job is about."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import StreamingResponse

from api.permissions import admin, any_credential
from api.audit import audited
from api.auth import Principal, caller
from api.strict import known_query_only
from api.context import AppContext, app_context
from api.jobs import queue_forget, visible_job
from schemas import api as m
from schemas.api_caps import CapsIn, CapsOut
from schemas.events import Id
from usecases import export as exporting
from usecases.audit import read_log
from usecases.caps import caps_report, set_caps
from usecases.cost import cost_report
from usecases.runs import list_run_summaries, replay_failed

router = APIRouter(tags=["admin"], responses=m.ERRORS, dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]
RunStatus = Literal["claimed", "running", "done", "failed", "dead", "erased"]


@router.get("/v1/admin/runs", response_model=m.RunsOut, summary="Formation runs, newest first",
            dependencies=[admin("listing runs")])
def runs(caller: Caller, ctx: Ctx, status: RunStatus | None = None, agent_id: Id | None = None,
         session_id: Id | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> m.RunsOut:
    return m.RunsOut(runs=list_run_summaries(ctx.store, status=status, agent_id=agent_id, session_id=session_id,
                                             limit=limit))


@router.post("/v1/admin/replay-failed", response_model=m.ReplayResult, summary="Replay failed and dead runs",
             dependencies=[admin("replaying runs")])
def replay(body: m.ReplayRequest, caller: Caller, ctx: Ctx) -> m.ReplayResult:
    result = audited(ctx, caller, replay_failed(ctx.store, ctx.clock.now(), ctx.settings.claim_lease_s, ctx.start_run,
                                                agent_id=body.agent_id, run_ids=body.run_ids or None))
    return m.ReplayResult.model_validate(result.report)


@router.get("/v1/admin/cost", response_model=m.CostOut, summary="An agent's model cost by model, stage or day",
            dependencies=[admin("reading cost")])
def cost(caller: Caller, ctx: Ctx, agent_id: Id, since: m.Instant | None = None,
         by: Literal["model", "stage", "day"] = "model") -> m.CostOut:
    return m.CostOut.model_validate(cost_report(ctx.store, agent_id, since=since, by=by))


@router.get("/v1/admin/caps", response_model=CapsOut, summary="Spend caps against the spend so far",
            dependencies=[admin("reading spend caps")])
def caps(caller: Caller, ctx: Ctx, agent_id: Id | None = None) -> CapsOut:
    """The global caps, then the agent's (or every agent's whose caps were set at run time), each
    with its priced spend of the current UTC day and month."""
    return CapsOut.model_validate(caps_report(ctx.store, ctx.settings, ctx.clock.now(), agent_id))


@router.put("/v1/admin/caps", response_model=CapsOut, summary="Set or remove an agent's or the global spend caps",
            dependencies=[admin("setting spend caps")])
def put_caps(body: CapsIn, caller: Caller, ctx: Ctx) -> CapsOut:
    now = ctx.clock.now()
    audited(ctx, caller, set_caps(ctx.store, body.agent_id, body.caps, now))
    return CapsOut.model_validate(caps_report(ctx.store, ctx.settings, now, body.agent_id))


@router.get("/v1/admin/audit", response_model=m.AuditList, summary="The audit log, newest first",
            dependencies=[admin("reading the audit log")])
def audit_log(caller: Caller, ctx: Ctx, since: m.Instant | None = None, action: str | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> m.AuditList:
    entries = read_log(ctx.store.access, since=since, action=action, limit=limit)
    return m.AuditList(entries=[m.AuditOut.model_validate(e.model_dump()) for e in entries])


@router.post("/v1/admin/forget-user", response_model=m.JobOut, status_code=202,
             summary="Erase everything of a user under one agent or all: a queued job",
             dependencies=[admin("forget-user")])
def forget_user(body: m.ForgetRequest, caller: Caller, ctx: Ctx) -> m.JobOut:
    return queue_forget(ctx, caller, body.user_id, body.agent_id)


@router.get("/v1/admin/export-user", summary="Everything stored about a user, as JSON Lines",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                             "description": "one JSON object per line: {collection, document}"}},
            dependencies=[admin("export-user")])
def export(caller: Caller, ctx: Ctx, user_id: Id, agent_id: Id | None = None) -> StreamingResponse:
    found = audited(ctx, caller, exporting.export_user(ctx.store, user_id, agent_id))
    return StreamingResponse(found.lines, media_type="application/x-ndjson")


@router.get("/v1/jobs/{job_id}", response_model=m.JobOut, summary="A queued job's status",
            dependencies=[any_credential("a job is shown to an admin, or to the user it is about")])
def job(job_id: Annotated[str, Path(min_length=1, max_length=64)], caller: Caller, ctx: Ctx) -> m.JobOut:
    return visible_job(ctx, caller, job_id)
