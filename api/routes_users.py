"""Users' own memory (seed 004, design §12), under ``/v1/agents/{agent_id}/users/{user_id}``:
see it, edit one fact, delete one item, switch user memory off or on, export it, ask to be
forgotten. Reached by the user's own token or an admin key; an agent key only reads."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path
from fastapi.responses import StreamingResponse

from api.access import reach, require_not_agent_key
from api.audit import audit
from api.auth import Principal, caller
from api.strict import known_query_only
from api.context import AppContext, app_context
from api.jobs import queue_forget
from api.routes_memory import AgentId
from api import user_memory
from ops.user_data import export_user
from pipeline.owner import blobs
from schemas import api as m
from schemas import api_owner as o
from schemas.access import subject_digest
from schemas.events import Id
from schemas.documents import scope_key

router = APIRouter(prefix="/v1/agents/{agent_id}/users/{user_id}", tags=["users"], responses=m.ERRORS, dependencies=[Depends(known_query_only)])

UserId = Annotated[Id, Path()]
ItemId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]


def _user(caller: Principal, agent_id: str, user_id: str) -> str:
    return reach(caller, agent_id, user_id=user_id, user_where="path user_id").user_id  # type: ignore[return-value]


@router.get("/memory", response_model=m.MyMemory, summary="What the agent keeps about this user")
def my_memory(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> m.MyMemory:
    return user_memory.list_memory(ctx.store, agent_id, _user(caller, agent_id, user_id), ctx.clock.now())


@router.patch("/memory/facts/{item_id}", response_model=m.MyFact, summary="Edit one of the user's own facts")
def edit_fact(agent_id: AgentId, user_id: UserId, item_id: ItemId, body: m.FactEdit, caller: Caller, ctx: Ctx) -> m.MyFact:
    require_not_agent_key(caller, "editing memory")
    user = _user(caller, agent_id, user_id)
    edited = user_memory.edit_fact(ctx.service(agent_id), agent_id, user, item_id, body.content,
                                   expires_at=body.expires_at)
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "item.edit", agent_id=agent_id,
          subject=subject_digest(agent_id, user))
    return edited


@router.delete("/memory/facts/{item_id}", response_model=m.Deleted, summary="Delete one fact, with its history")
def delete_fact(agent_id: AgentId, user_id: UserId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, user_id, "fact", item_id, caller, ctx)


@router.delete("/memory/reflections/{item_id}", response_model=m.Deleted,
               summary="Delete one reflection (a blob that absorbed it is merged again without it)")
def delete_reflection(agent_id: AgentId, user_id: UserId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, user_id, "reflection", item_id, caller, ctx)


def _delete(agent_id: str, user_id: str, kind: Literal["fact", "reflection"], item_id: str, caller: Principal,
            ctx: AppContext) -> m.Deleted:
    require_not_agent_key(caller, "deleting memory")
    user = _user(caller, agent_id, user_id)
    subject = subject_digest(agent_id, user)
    deleted = user_memory.delete_item(ctx.deps, agent_id, user, kind, item_id, holder=f"delete:{subject}")
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "item.delete", agent_id=agent_id,
          subject=subject, counts={kind + "s": 1})
    return deleted


@router.patch("/memory/reflections/{item_id}", response_model=m.MyReflection,
              summary="Edit one of the user's reflections waiting for consolidation, with history")
def edit_reflection(agent_id: AgentId, user_id: UserId, item_id: ItemId, body: m.FactEdit, caller: Caller,
                    ctx: Ctx) -> m.MyReflection:
    require_not_agent_key(caller, "editing memory")
    user = _user(caller, agent_id, user_id)
    edited = user_memory.edit_reflection(ctx.store, ctx.settings, agent_id, user, item_id, body.content,
                                         by=caller.credential_id, now=ctx.clock.now())
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "item.edit", agent_id=agent_id,
          subject=subject_digest(agent_id, user), counts={"reflections": 1})
    return edited


@router.put("/memory/blob/sections/{section}", response_model=m.MyBlob,
            summary="Rewrite one section of the user's own blob: a new version, screened, with history")
def edit_blob_section(agent_id: AgentId, user_id: UserId, section: Annotated[str, Path(min_length=1, max_length=80)],
                      body: o.SectionLines, caller: Caller, ctx: Ctx) -> m.MyBlob:
    require_not_agent_key(caller, "editing memory")
    user = _user(caller, agent_id, user_id)
    blob = blobs.edit_section(ctx.store, ctx.settings, agent_id, scope_key("user", user_id=user), section,
                              body.bullets, by=caller.credential_id, now=ctx.clock.now(), people=[user])
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "blob.edit", agent_id=agent_id,
          subject=subject_digest(agent_id, user), counts={"version": blob.version})
    return m.MyBlob(content=blob.consolidated_content, version=blob.version,
                    last_consolidated_at=blob.last_consolidated_at)


@router.get("/memory-setting", response_model=m.UserMemorySetting, summary="Whether user memory is on")
def get_setting(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> m.UserMemorySetting:
    user = _user(caller, agent_id, user_id)
    return m.UserMemorySetting(agent_id=agent_id, user_id=user, enabled=not ctx.store.access.user_memory_off(agent_id, [user]))


@router.put("/memory-setting", response_model=m.UserMemorySetting,
            summary="Switch this user's memory with this agent off or on (items are kept)")
def put_setting(agent_id: AgentId, user_id: UserId, body: m.UserMemorySwitch, caller: Caller,
                ctx: Ctx) -> m.UserMemorySetting:
    require_not_agent_key(caller, "switching user memory")
    user = _user(caller, agent_id, user_id)
    ctx.store.access.set_user_memory(agent_id, user, body.enabled, ctx.clock.now())
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "user_memory.switch", agent_id=agent_id,
          subject=subject_digest(agent_id, user), counts={"enabled": int(body.enabled)})
    return m.UserMemorySetting(agent_id=agent_id, user_id=user, enabled=body.enabled)


@router.get("/export", summary="Everything stored about this user under this agent, as JSON Lines",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                             "description": "one JSON object per line: {collection, document}"}})
def export(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> StreamingResponse:
    require_not_agent_key(caller, "exporting memory")
    user = _user(caller, agent_id, user_id)
    audit(ctx.store, ctx.clock.now(), caller.credential_id, caller.kind, "export_user", agent_id=agent_id,
          subject=subject_digest(agent_id, user))
    return StreamingResponse(export_user(ctx.store, user, agent_id), media_type="application/x-ndjson")


@router.post("/forget", response_model=m.JobOut, status_code=202,
             summary="Erase everything of this user under this agent: a queued job")
def forget(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> m.JobOut:
    require_not_agent_key(caller, "erasure")
    return queue_forget(ctx, caller, _user(caller, agent_id, user_id), agent_id)
