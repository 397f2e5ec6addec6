"""An owner's curation of stored memory (design §13), under ``/v1/agents/{agent_id}``: the
agent-scope facts (list, edit, delete), the agent-scope reflections waiting for consolidation
(list, delete), a section of a scope's blob, and a user's whole blob. Reached by an admin key
or an agent key with the ``curate`` scope; every change is audited without content and moves
the scope's version stamp (caches rebuild)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from api import user_memory
from api.audit import audited
from api.auth import Principal, caller
from api.context import AppContext, app_context
from api.errors import ApiError, NotFound
from api.permissions import curator
from api.routes_memory import AgentId
from api.routes_users import ItemId, UserId
from api.strict import known_query_only
from schemas import api as m
from schemas import api_owner as o
from pipeline.validity import expired
from schemas.documents import scope_key
from usecases import edit

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["owner"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]


def _agent_fact(ctx: AppContext, agent_id: str, fact_id: str):
    found = edit.agent_fact(ctx.store, agent_id, fact_id)
    if found is None:
        raise NotFound("no such live fact in this agent's shared (agent) memory", "path item_id")
    return found


def _pending(ctx: AppContext, agent_id: str, reflection_id: str):
    found = edit.pending_agent_reflection(ctx.store, agent_id, reflection_id)
    if found is None:
        raise NotFound("no such agent-scope reflection waiting for consolidation", "path item_id")
    return found


@router.get("/memory/facts", response_model=o.CuratedFacts, summary="The agent-scope facts, newest first",
            dependencies=[curator("curating memory")])
def list_facts(agent_id: AgentId, caller: Caller, ctx: Ctx, limit: Annotated[int, Query(ge=1, le=500)] = 50,
               offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0) -> o.CuratedFacts:
    facts, total = edit.agent_facts(ctx.store, agent_id, limit=limit, offset=offset)
    return o.CuratedFacts(agent_id=agent_id, total=total, facts=[user_memory.fact_out(f, True) for f in facts])


@router.patch("/memory/facts/{item_id}", response_model=m.MyFact,
              summary="Edit an agent-scope fact: an UPDATE with history, screened",
              dependencies=[curator("curating memory")])
def edit_fact(agent_id: AgentId, item_id: ItemId, body: m.FactEdit, caller: Caller, ctx: Ctx) -> m.MyFact:
    fact = _agent_fact(ctx, agent_id, item_id)
    if expired(fact, ctx.clock.now()):  # out of reads already: it is shown as expired, not brought back by an edit
        raise ApiError("conflict", "path item_id", f"the fact expired at {fact.expires_at.isoformat()}; delete it, "
                       "or write the text anew", status=409)
    edited = edit.edit_agent_fact(ctx.service(agent_id), fact, body.content, expires_at=body.expires_at,
                                  clear_expiry=body.clears_expiry, categories=body.categories,
                                  metadata=body.metadata_change)
    if edited is None:
        raise ApiError("conflict", "body content", "the fact changed meanwhile, or another agent fact already "
                       "says this; list the facts and try again", status=409)
    return user_memory.fact_out(audited(ctx, caller, edited).item, True)


@router.get("/memory/reflections", response_model=o.CuratedReflections,
            summary="The agent-scope reflections waiting for consolidation, oldest first",
            dependencies=[curator("curating memory")])
def list_reflections(agent_id: AgentId, caller: Caller, ctx: Ctx) -> o.CuratedReflections:
    return o.CuratedReflections(agent_id=agent_id, reflections=[
        user_memory.reflection_out(r, True) for r in edit.pending_agent_reflections(ctx.store, agent_id)])


@router.patch("/memory/reflections/{item_id}", response_model=m.MyReflection,
              summary="Edit an agent-scope reflection waiting for consolidation, with history",
              dependencies=[curator("curating memory")])
def edit_reflection(agent_id: AgentId, item_id: ItemId, body: m.ReflectionEdit, caller: Caller,
                    ctx: Ctx) -> m.MyReflection:
    edited = edit.edit_agent_reflection(ctx.store, ctx.settings, _pending(ctx, agent_id, item_id), body.content,
                                        by=caller.credential_id, now=ctx.clock.now())
    if edited is None:
        raise ApiError("conflict", "path item_id", "a consolidation absorbed it meanwhile; edit the blob instead",
                       status=409)
    return user_memory.reflection_out(audited(ctx, caller, edited).item, True)


@router.delete("/memory/facts/{item_id}", response_model=m.Deleted,
               summary="Delete an agent-scope fact, with its history", dependencies=[curator("curating memory")])
def delete_fact(agent_id: AgentId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, "facts", item_id, caller, ctx)


@router.delete("/memory/reflections/{item_id}", response_model=m.Deleted,
               summary="Delete a pending agent-scope reflection", dependencies=[curator("curating memory")])
def delete_reflection(agent_id: AgentId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, "reflections", item_id, caller, ctx)


def _delete(agent_id: str, kind: Literal["facts", "reflections"], item_id: str, caller: Principal,
            ctx: AppContext) -> m.Deleted:
    """One route per kind, so each path's methods are the ones its document lists (``Allow``)."""
    item = _agent_fact(ctx, agent_id, item_id) if kind == "facts" else _pending(ctx, agent_id, item_id)
    audited(ctx, caller, edit.delete_agent_item(ctx.deps, item, holder=f"curate:{caller.credential_id}"))
    return m.Deleted(deleted=item_id, kind=kind.removesuffix("s"))  # type: ignore[arg-type]


@router.put("/memory/blob/sections/{section}", response_model=o.BlobOut,
            summary="Rewrite one section of the agent's or a session's blob: a new version, the owner its source",
            dependencies=[curator("curating memory")])
def edit_section(agent_id: AgentId, section: Annotated[str, Path(min_length=1, max_length=80)],
                 body: o.SectionEdit, caller: Caller, ctx: Ctx) -> o.BlobOut:
    key = body.scope if body.scope == "agent" else scope_key("session", session_id=body.session_id or "")
    if body.scope == "session" and not body.session_id:
        raise ApiError("invalid request", "body session_id", "a session blob names its session", status=422)
    blob = audited(ctx, caller, edit.edit_section(ctx.store, ctx.settings, agent_id, key, section, body.bullets,
                                                  by=caller.credential_id, now=ctx.clock.now(), subject=body.scope))
    return o.BlobOut.model_validate(blob.item.model_dump())


@router.put("/users/{user_id}/memory/blob", response_model=o.BlobOut,
            summary="Replace a user's blob (v1's POST /agents/{a}/memory): a new version, the owner its source",
            dependencies=[curator("replacing a user's memory")])
def replace_user_blob(agent_id: AgentId, user_id: UserId, body: o.BlobReplace, caller: Caller, ctx: Ctx) -> o.BlobOut:
    blob = audited(ctx, caller, edit.replace_user_blob(ctx.store, ctx.settings, agent_id, user_id, body.content,
                                                       by=caller.credential_id, now=ctx.clock.now()))
    return o.BlobOut.model_validate(blob.item.model_dump())
