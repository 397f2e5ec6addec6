"""An owner's routes (design §13 "Owner controls"), under ``/v1/agents/{agent_id}``: Memory
Instructions (read, set, clear, roll back), pause and resume, the category list and the filterable metadata
keys. Reached by an admin key or
an agent key with the ``curate`` scope (``api.permissions.curator``, declared on each route); every change is
audited without its text."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from api.audit import audited
from api.auth import Principal, caller
from api.context import AppContext, app_context
from api.permissions import curator
from api.routes_memory import AgentId
from api.strict import known_query_only
from schemas import api as m
from schemas import api_owner as o
from schemas.owner import InstructionScope, InstructionStage
from usecases import categories, instructions, metadata_keys, pauses

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["owner"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]
Stage = Annotated[InstructionStage, Path(description="extraction or consolidation")]
ScopeType = Annotated[InstructionScope, Path(description="all, or one scope type that refines it")]


def _out(instruction) -> o.InstructionOut:
    return o.InstructionOut.model_validate(instruction.model_dump())


@router.get("/instructions", response_model=o.InstructionsOut, summary="The agent's Memory Instructions",
            dependencies=[curator("reading instructions")])
def get_instructions(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.InstructionsOut:
    found = instructions.read(ctx.store.ingest, agent_id)
    return o.InstructionsOut(agent_id=agent_id, current=[_out(i) for i in found.current],
                             history=[_out(i) for i in found.history])


@router.put("/instructions/{stage}/{scope}", response_model=o.InstructionOut,
            summary="Set the instruction of a stage (and scope type): a new version",
            dependencies=[curator("setting instructions")])
def set_instruction(agent_id: AgentId, stage: Stage, scope: ScopeType, body: o.InstructionText, caller: Caller,
                    ctx: Ctx) -> o.InstructionOut:
    return _out(audited(ctx, caller, instructions.set_text(ctx.store.ingest, ctx.settings, agent_id, stage, scope,
                                                           body.text, by=caller.credential_id,
                                                           now=ctx.clock.now())).instruction)


@router.delete("/instructions/{stage}/{scope}", response_model=o.InstructionOut,
               summary="Clear the instruction of a stage (and scope type): a new, empty version",
               dependencies=[curator("clearing instructions")])
def clear_instruction(agent_id: AgentId, stage: Stage, scope: ScopeType, caller: Caller, ctx: Ctx) -> o.InstructionOut:
    return _out(audited(ctx, caller, instructions.clear(ctx.store.ingest, agent_id, stage, scope,
                                                        by=caller.credential_id, now=ctx.clock.now())).instruction)


@router.post("/instructions/{stage}/{scope}/rollback", response_model=o.InstructionOut,
             summary="Bring back an earlier version's text: a new version",
             dependencies=[curator("rolling instructions back")])
def rollback_instruction(agent_id: AgentId, stage: Stage, scope: ScopeType, body: o.InstructionRollback,
                         caller: Caller, ctx: Ctx) -> o.InstructionOut:
    return _out(audited(ctx, caller, instructions.rollback(ctx.store.ingest, ctx.settings, agent_id, stage, scope,
                                                           body.version, by=caller.credential_id,
                                                           now=ctx.clock.now())).instruction)


@router.get("/pauses", response_model=o.PausesOut, summary="What is paused for this agent",
            dependencies=[curator("reading pauses")])
def get_pauses(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.PausesOut:
    return o.PausesOut(agent_id=agent_id, paused=[o.PauseOut.model_validate(p.model_dump())
                                                  for p in pauses.paused(ctx.store.ingest, agent_id)])


@router.post("/pause", response_model=o.PauseOut,
             summary="Pause formation for the agent, its agent memory or a session (content and events kept)",
             dependencies=[curator("pausing memory")])
def pause(agent_id: AgentId, body: o.PauseRequest, caller: Caller, ctx: Ctx) -> o.PauseOut:
    found = audited(ctx, caller, pauses.pause(ctx.store.ingest, agent_id, body.target, session_id=body.session_id,
                                              by=caller.credential_id, now=ctx.clock.now()))
    return o.PauseOut.model_validate(found.pause.model_dump())


@router.post("/resume", response_model=o.Resumed,
             summary="Resume formation; with backfill, form from the messages of the pause",
             dependencies=[curator("resuming memory")])
def resume(agent_id: AgentId, body: o.ResumeRequest, caller: Caller, ctx: Ctx) -> o.Resumed:
    now = ctx.clock.now()
    done = audited(ctx, caller, pauses.resume(ctx.store, agent_id, body.target, session_id=body.session_id, now=now,
                                              backfill_lease_s=ctx.settings.claim_lease_s if body.backfill else None,
                                              start=ctx.start_run))
    return o.Resumed(scope_key=done.ended.scope_key, paused_at=done.ended.paused_at, resumed_at=now,
                     backfill_runs=done.runs)


def _categories(found: categories.Categories) -> o.CategoriesOut:
    return o.CategoriesOut(agent_id=found.agent_id, categories=found.names, version=found.version,
                           history=[o.CategoryVersionOut.model_validate(v.model_dump()) for v in found.history])


@router.get("/categories", response_model=o.CategoriesOut, summary="The agent's categories and their versions",
            dependencies=[curator("reading categories")])
def get_categories(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.CategoriesOut:
    return _categories(categories.show(ctx.store.ingest, agent_id))


@router.put("/categories", response_model=o.CategoriesOut,
            summary="Set the agent's categories: a new version, used by the next extractions",
            dependencies=[curator("setting categories")])
def set_categories(agent_id: AgentId, body: o.CategoryNames, caller: Caller, ctx: Ctx) -> o.CategoriesOut:
    return _categories(audited(ctx, caller, categories.set_list(ctx.store.ingest, agent_id, body.categories,
                                                                by=caller.credential_id, now=ctx.clock.now())))


@router.post("/categories/rollback", response_model=o.CategoriesOut,
             summary="Bring back an earlier version's list: a new version",
             dependencies=[curator("rolling categories back")])
def rollback_categories(agent_id: AgentId, body: o.InstructionRollback, caller: Caller, ctx: Ctx) -> o.CategoriesOut:
    return _categories(audited(ctx, caller, categories.rollback(ctx.store.ingest, agent_id, body.version,
                                                                by=caller.credential_id, now=ctx.clock.now())))


@router.get("/metadata-keys", response_model=o.MetadataKeysOut,
            summary="The event metadata keys the agent's facts keep", dependencies=[curator("reading metadata keys")])
def get_metadata_keys(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.MetadataKeysOut:
    found = metadata_keys.show(ctx.store.ingest, agent_id)
    return o.MetadataKeysOut(agent_id=found.agent_id, metadata_keys=found.keys)


@router.put("/metadata-keys", response_model=o.MetadataKeysOut,
            summary="Set the event metadata keys facts formed from now on keep",
            dependencies=[curator("setting metadata keys")])
def set_metadata_keys(agent_id: AgentId, body: o.MetadataKeyNames, caller: Caller, ctx: Ctx) -> o.MetadataKeysOut:
    found = audited(ctx, caller, metadata_keys.set_keys(ctx.store.ingest, agent_id, body.metadata_keys,
                                                        now=ctx.clock.now()))
    return o.MetadataKeysOut(agent_id=found.agent_id, metadata_keys=found.keys)
