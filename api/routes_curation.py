"""An owner's curation of stored memory (design §13), under ``/v1/agents/{agent_id}``: the
agent-scope facts (list, edit, delete), the agent-scope reflections waiting for consolidation
(list, delete), a section of a scope's blob, and a user's whole blob. Reached by an admin key
or an agent key with the ``curate`` scope; every change is audited without content and moves
the scope's version stamp (caches rebuild)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from api import user_memory
from api.access import require_curator
from api.audit import audit
from api.auth import Principal, caller
from api.context import AppContext, app_context
from api.errors import ApiError, NotFound
from api.routes_memory import AgentId
from api.routes_users import ItemId, UserId
from api.strict import known_query_only
from ops.user_data import delete_items, deletion_plan
from pipeline.owner import blobs, curation
from schemas import api as m
from schemas import api_owner as o
from schemas.access import subject_digest
from schemas.documents import scope_key

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["owner"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]
AGENT = scope_key("agent")


def _audit(ctx: AppContext, who: Principal, action: str, agent_id: str, subject: str, **counts: int) -> None:
    audit(ctx.store, ctx.clock.now(), who.credential_id, who.kind, action, agent_id=agent_id, subject=subject,
          counts=counts)


def _agent_fact(ctx: AppContext, agent_id: str, fact_id: str):
    found = next((f for f in ctx.store.facts.get_facts([fact_id])
                  if f.agent_id == agent_id and f.scope_key == AGENT and f.retired_at is None), None)
    if found is None:
        raise NotFound("no such live fact in this agent's shared (agent) memory", "path item_id")
    return found


@router.get("/memory/facts", response_model=o.CuratedFacts, summary="The agent-scope facts, newest first")
def list_facts(agent_id: AgentId, caller: Caller, ctx: Ctx, limit: Annotated[int, Query(ge=1, le=500)] = 50,
               offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0) -> o.CuratedFacts:
    require_curator(caller, agent_id, "curating memory")
    facts = ctx.store.facts.list_facts(agent_id, AGENT, limit=limit, offset=offset)
    return o.CuratedFacts(agent_id=agent_id, total=ctx.store.facts.count_facts(agent_id, AGENT),
                          facts=[user_memory.fact_out(f, True) for f in facts])


@router.patch("/memory/facts/{item_id}", response_model=m.MyFact,
              summary="Edit an agent-scope fact: an UPDATE with history, screened")
def edit_fact(agent_id: AgentId, item_id: ItemId, body: m.FactEdit, caller: Caller, ctx: Ctx) -> m.MyFact:
    require_curator(caller, agent_id, "curating memory")
    fact = _agent_fact(ctx, agent_id, item_id)
    updated = curation.edit_fact(ctx.service(agent_id), fact, body.content, people=list(fact.source_user_ids))
    if updated is None:
        raise ApiError("conflict", "body content", "the fact changed meanwhile, or another agent fact already "
                       "says this; list the facts and try again", status=409)
    _audit(ctx, caller, "item.edit", agent_id, "agent", facts=1)
    return user_memory.fact_out(updated, True)


@router.get("/memory/reflections", response_model=o.CuratedReflections,
            summary="The agent-scope reflections waiting for consolidation, oldest first")
def list_reflections(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.CuratedReflections:
    require_curator(caller, agent_id, "curating memory")
    return o.CuratedReflections(agent_id=agent_id, reflections=[
        user_memory.reflection_out(r, True) for r in ctx.store.reflections.unabsorbed_reflections(agent_id, AGENT)])


@router.patch("/memory/reflections/{item_id}", response_model=m.MyReflection,
              summary="Edit an agent-scope reflection waiting for consolidation, with history")
def edit_reflection(agent_id: AgentId, item_id: ItemId, body: m.FactEdit, caller: Caller, ctx: Ctx) -> m.MyReflection:
    require_curator(caller, agent_id, "curating memory")
    found = next((r for r in ctx.store.reflections.unabsorbed_reflections(agent_id, AGENT) if r.reflection_id == item_id), None)
    if found is None:
        raise NotFound("no such agent-scope reflection waiting for consolidation", "path item_id")
    edited = curation.edit_reflection(ctx.store, ctx.settings, found, body.content, by=caller.credential_id,
                                      now=ctx.clock.now(), people=list(found.source_user_ids))
    if edited is None:
        raise ApiError("conflict", "path item_id", "a consolidation absorbed it meanwhile; edit the blob instead",
                       status=409)
    _audit(ctx, caller, "item.edit", agent_id, "agent", reflections=1)
    return user_memory.reflection_out(edited, True)


@router.delete("/memory/facts/{item_id}", response_model=m.Deleted, summary="Delete an agent-scope fact, with its history")
def delete_fact(agent_id: AgentId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, "facts", item_id, caller, ctx)


@router.delete("/memory/reflections/{item_id}", response_model=m.Deleted,
               summary="Delete a pending agent-scope reflection")
def delete_reflection(agent_id: AgentId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, "reflections", item_id, caller, ctx)


def _delete(agent_id: str, kind: Literal["facts", "reflections"], item_id: str, caller: Principal,
            ctx: AppContext) -> m.Deleted:
    """One route per kind, so each path's methods are the ones its document lists (``Allow``)."""
    require_curator(caller, agent_id, "curating memory")
    if kind == "facts":
        item = _agent_fact(ctx, agent_id, item_id)
    else:
        item = next((r for r in ctx.store.reflections.unabsorbed_reflections(agent_id, AGENT) if r.reflection_id == item_id), None)
        if item is None:
            raise NotFound("no such agent-scope reflection waiting for consolidation", "path item_id")
    delete_items(ctx.deps, deletion_plan(ctx.store, item), holder=f"curate:{caller.credential_id}")
    _audit(ctx, caller, "item.delete", agent_id, "agent", **{kind: 1})
    return m.Deleted(deleted=item_id, kind=kind.removesuffix("s"))  # type: ignore[arg-type]


@router.put("/memory/blob/sections/{section}", response_model=o.BlobOut,
            summary="Rewrite one section of the agent's or a session's blob: a new version, the owner its source")
def edit_section(agent_id: AgentId, section: Annotated[str, Path(min_length=1, max_length=80)],
                 body: o.SectionEdit, caller: Caller, ctx: Ctx) -> o.BlobOut:
    require_curator(caller, agent_id, "curating memory")
    key = body.scope if body.scope == "agent" else scope_key("session", session_id=body.session_id or "")
    if body.scope == "session" and not body.session_id:
        raise ApiError("invalid request", "body session_id", "a session blob names its session", status=422)
    blob = blobs.edit_section(ctx.store, ctx.settings, agent_id, key, section, body.bullets, by=caller.credential_id,
                              now=ctx.clock.now())
    _audit(ctx, caller, "blob.edit", agent_id, body.scope, version=blob.version)
    return o.BlobOut.model_validate(blob.model_dump())


@router.put("/users/{user_id}/memory/blob", response_model=o.BlobOut,
            summary="Replace a user's blob (v1's POST /agents/{a}/memory): a new version, the owner its source")
def replace_user_blob(agent_id: AgentId, user_id: UserId, body: o.BlobReplace, caller: Caller, ctx: Ctx) -> o.BlobOut:
    require_curator(caller, agent_id, "replacing a user's memory")
    blob = blobs.replace_user_blob(ctx.store, ctx.settings, agent_id, user_id, body.content,
                                   by=caller.credential_id, now=ctx.clock.now())
    _audit(ctx, caller, "blob.replace", agent_id, subject_digest(agent_id, user_id), version=blob.version)
    return o.BlobOut.model_validate(blob.model_dump())
