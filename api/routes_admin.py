"""Operators' routes (admin keys), under ``/v1/admin``: runs, replay of failed runs, cost, spend caps, the
audit log, and a person's export and erasure under one agent or all. Jobs are polled at
``/v1/jobs/{job_id}`` by an admin, or by the user a job is about."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import StreamingResponse

from api.access import require_admin
from api.audit import audit
from api.auth import Principal, caller
from api.strict import known_query_only
from api.context import AppContext, app_context
from api.jobs import queue_forget, visible_job
from ops.caps import caps_report, set_caps
from ops.cost import cost_report
from ops.runs import list_run_summaries, replay_failed
from ops.user_data import export_user
from schemas import api as m
from schemas.access import subject_digest
from schemas.api_caps import CapsIn, CapsOut
from schemas.events import Id

router = APIRouter(tags=["admin"], responses=m.ERRORS, dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]
RunStatus = Literal["claimed", "running", "done", "failed", "dead", "erased"]


@router.get("/v1/admin/runs", response_model=m.RunsOut, summary="Formation runs, newest first")
def runs(caller: Caller, ctx: Ctx, status: RunStatus | None = None, agent_id: Id | None = None,
         session_id: Id | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> m.RunsOut:
    require_admin(caller, "listing runs")
    return m.RunsOut(runs=list_run_summaries(ctx.store, status=status, agent_id=agent_id, session_id=session_id,
                                             limit=limit))


@router.post("/v1/admin/replay-failed", response_model=m.ReplayResult, summary="Replay failed and dead runs")
def replay(body: m.ReplayRequest, caller: Caller, ctx: Ctx) -> m.ReplayResult:
    require_admin(caller, "replaying runs")
    result = replay_failed(ctx.store, ctx.clock.now(), ctx.settings.claim_lease_s, ctx.start_run,
                           agent_id=body.agent_id, run_ids=body.run_ids or None)
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "replay_failed", agent_id=body.agent_id,
          counts={"replayed": len(result["replayed"]), "skipped": len(result["skipped"])})
    return m.ReplayResult.model_validate(result)


@router.get("/v1/admin/cost", response_model=m.CostOut, summary="An agent's model cost by model, stage or day")
def cost(caller: Caller, ctx: Ctx, agent_id: Id, since: m.Instant | None = None,
         by: Literal["model", "stage", "day"] = "model") -> m.CostOut:
    require_admin(caller, "reading cost")
    return m.CostOut.model_validate(cost_report(ctx.store, agent_id, since=since, by=by))


@router.get("/v1/admin/caps", response_model=CapsOut, summary="Spend caps against the spend so far")
def caps(caller: Caller, ctx: Ctx, agent_id: Id | None = None) -> CapsOut:
    """The global caps, then the agent's (or every agent's whose caps were set at run time), each
    with its priced spend of the current UTC day and month."""
    require_admin(caller, "reading spend caps")
    return CapsOut.model_validate(caps_report(ctx.store, ctx.settings, ctx.clock.now(), agent_id))


@router.put("/v1/admin/caps", response_model=CapsOut, summary="Set or remove an agent's or the global spend caps")
def put_caps(body: CapsIn, caller: Caller, ctx: Ctx) -> CapsOut:
    require_admin(caller, "setting spend caps")
    now = ctx.clock.now()
    set_caps(ctx.store, body.agent_id, body.caps, now)
    audit(ctx.store, now, caller.credential_id, caller.kind, "caps.set", agent_id=body.agent_id,
          subject="global" if body.agent_id is None else "agent")
    return CapsOut.model_validate(caps_report(ctx.store, ctx.settings, now, body.agent_id))


@router.get("/v1/admin/audit", response_model=m.AuditList, summary="The audit log, newest first")
def audit_log(caller: Caller, ctx: Ctx, since: m.Instant | None = None, action: str | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> m.AuditList:
    require_admin(caller, "reading the audit log")
    entries = ctx.store.access.list_audit(since=since, action=action, limit=limit)
    return m.AuditList(entries=[m.AuditOut.model_validate(e.model_dump()) for e in entries])


@router.post("/v1/admin/forget-user", response_model=m.JobOut, status_code=202,
             summary="Erase everything of a user under one agent or all: a queued job")
def forget_user(body: m.ForgetRequest, caller: Caller, ctx: Ctx) -> m.JobOut:
    require_admin(caller, "forget-user")
    return queue_forget(ctx, caller, body.user_id, body.agent_id)


@router.get("/v1/admin/export-user", summary="Everything stored about a user, as JSON Lines",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                             "description": "one JSON object per line: {collection, document}"}})
def export(caller: Caller, ctx: Ctx, user_id: Id, agent_id: Id | None = None) -> StreamingResponse:
    require_admin(caller, "export-user")
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "export_user", agent_id=agent_id,
          subject=subject_digest(agent_id, user_id))
    return StreamingResponse(export_user(ctx.store, user_id, agent_id), media_type="application/x-ndjson")


@router.get("/v1/jobs/{job_id}", response_model=m.JobOut, summary="A queued job's status")
def job(job_id: Annotated[str, Path(min_length=1, max_length=64)], caller: Caller, ctx: Ctx) -> m.JobOut:
    return visible_job(ctx, caller, job_id)
