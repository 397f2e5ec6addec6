"""An owner's routes (design §13 "Owner controls"), under ``/v1/agents/{agent_id}``: Memory
Instructions (read, set, clear, roll back) and pause and resume. Reached by an admin key or
an agent key with the ``curate`` scope (``api.access.require_curator``); every change is
audited without its text."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from api.access import require_curator
from api.audit import audited
from api.auth import Principal, caller
from api.context import AppContext, app_context
from api.routes_memory import AgentId
from api.strict import known_query_only
from schemas import api as m
from schemas import api_owner as o
from schemas.owner import InstructionScope, InstructionStage
from usecases import instructions, pauses

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["owner"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]
Stage = Annotated[InstructionStage, Path(description="extraction or consolidation")]
ScopeType = Annotated[InstructionScope, Path(description="all, or one scope type that refines it")]


def _out(instruction) -> o.InstructionOut:
    return o.InstructionOut.model_validate(instruction.model_dump())


@router.get("/instructions", response_model=o.InstructionsOut, summary="The agent's Memory Instructions")
def get_instructions(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.InstructionsOut:
    require_curator(caller, agent_id, "reading instructions")
    found = instructions.read(ctx.store, agent_id)
    return o.InstructionsOut(agent_id=agent_id, current=[_out(i) for i in found.current],
                             history=[_out(i) for i in found.history])


@router.put("/instructions/{stage}/{scope}", response_model=o.InstructionOut,
            summary="Set the instruction of a stage (and scope type): a new version")
def set_instruction(agent_id: AgentId, stage: Stage, scope: ScopeType, body: o.InstructionText, caller: Caller,
                    ctx: Ctx) -> o.InstructionOut:
    require_curator(caller, agent_id, "setting instructions")
    return _out(audited(ctx, caller, instructions.set_text(ctx.store, ctx.settings, agent_id, stage, scope, body.text,
                                                           by=caller.credential_id, now=ctx.clock.now())).instruction)


@router.delete("/instructions/{stage}/{scope}", response_model=o.InstructionOut,
               summary="Clear the instruction of a stage (and scope type): a new, empty version")
def clear_instruction(agent_id: AgentId, stage: Stage, scope: ScopeType, caller: Caller, ctx: Ctx) -> o.InstructionOut:
    require_curator(caller, agent_id, "clearing instructions")
    return _out(audited(ctx, caller, instructions.clear(ctx.store, agent_id, stage, scope, by=caller.credential_id,
                                                        now=ctx.clock.now())).instruction)


@router.post("/instructions/{stage}/{scope}/rollback", response_model=o.InstructionOut,
             summary="Bring back an earlier version's text: a new version")
def rollback_instruction(agent_id: AgentId, stage: Stage, scope: ScopeType, body: o.InstructionRollback,
                         caller: Caller, ctx: Ctx) -> o.InstructionOut:
    require_curator(caller, agent_id, "rolling instructions back")
    return _out(audited(ctx, caller, instructions.rollback(ctx.store, ctx.settings, agent_id, stage, scope,
                                                           body.version, by=caller.credential_id,
                                                           now=ctx.clock.now())).instruction)


@router.get("/pauses", response_model=o.PausesOut, summary="What is paused for this agent")
def get_pauses(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.PausesOut:
    require_curator(caller, agent_id, "reading pauses")
    return o.PausesOut(agent_id=agent_id, paused=[o.PauseOut.model_validate(p.model_dump())
                                                  for p in pauses.paused(ctx.store, agent_id)])


@router.post("/pause", response_model=o.PauseOut,
             summary="Pause formation for the agent, its agent memory or a session (content and events kept)")
def pause(agent_id: AgentId, body: o.PauseRequest, caller: Caller, ctx: Ctx) -> o.PauseOut:
    require_curator(caller, agent_id, "pausing memory")
    found = audited(ctx, caller, pauses.pause(ctx.store, agent_id, body.target, session_id=body.session_id,
                                              by=caller.credential_id, now=ctx.clock.now()))
    return o.PauseOut.model_validate(found.pause.model_dump())


@router.post("/resume", response_model=o.Resumed,
             summary="Resume formation; with backfill, form from the messages of the pause")
def resume(agent_id: AgentId, body: o.ResumeRequest, caller: Caller, ctx: Ctx) -> o.Resumed:
    require_curator(caller, agent_id, "resuming memory")
    now = ctx.clock.now()
    done = audited(ctx, caller, pauses.resume(ctx.store, agent_id, body.target, session_id=body.session_id, now=now,
                                              backfill_lease_s=ctx.settings.claim_lease_s if body.backfill else None,
                                              start=ctx.start_run))
    return o.Resumed(scope_key=done.ended.scope_key, paused_at=done.ended.paused_at, resumed_at=now,
                     backfill_runs=done.runs)
