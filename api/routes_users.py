"""Users' own memory (seed 004, design §12), under ``/v1/agents/{agent_id}/users/{user_id}``:
see it, edit one fact, delete one item, switch user memory off or on, export it, ask to be
forgotten. Reached by the user's own token or an admin key; an agent key only reads."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path
from fastapi.responses import StreamingResponse

from api.access import reach
from api.audit import audited
from api.auth import Principal, caller
from api.strict import known_query_only
from api.context import AppContext, app_context
from api.jobs import queue_forget
from api.permissions import not_agent_key, of_agent
from api.routes_memory import AgentId
from api import user_memory
from schemas import api as m
from schemas import api_owner as o
from schemas.access import subject_digest
from schemas.events import Id
from schemas.documents import scope_key
from usecases import edit, export as exporting

router = APIRouter(prefix="/v1/agents/{agent_id}/users/{user_id}", tags=["users"], responses=m.ERRORS, dependencies=[Depends(known_query_only)])

UserId = Annotated[Id, Path()]
ItemId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]
Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]


def _user(caller: Principal, agent_id: str, user_id: str) -> str:
    return reach(caller, agent_id, user_id=user_id, user_where="path user_id").user_id  # type: ignore[return-value]


@router.get("/memory", response_model=m.MyMemory, summary="What the agent keeps about this user",
            dependencies=[of_agent("reading a user's memory")])
def my_memory(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> m.MyMemory:
    return user_memory.list_memory(ctx.store, agent_id, _user(caller, agent_id, user_id), ctx.clock.now())


@router.patch("/memory/facts/{item_id}", response_model=m.MyFact, summary="Edit one of the user's own facts",
              dependencies=[not_agent_key("editing memory")])
def edit_fact(agent_id: AgentId, user_id: UserId, item_id: ItemId, body: m.FactEdit, caller: Caller, ctx: Ctx) -> m.MyFact:
    user = _user(caller, agent_id, user_id)
    return audited(ctx, caller, user_memory.edit_fact(ctx.service(agent_id), agent_id, user, item_id, body.content,
                                                      expires_at=body.expires_at, clear_expiry=body.clears_expiry,
                                                      categories=body.categories,
                                                      metadata=body.metadata_change)).item


@router.delete("/memory/facts/{item_id}", response_model=m.Deleted, summary="Delete one fact, with its history",
               dependencies=[not_agent_key("deleting memory")])
def delete_fact(agent_id: AgentId, user_id: UserId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, user_id, "fact", item_id, caller, ctx)


@router.delete("/memory/reflections/{item_id}", response_model=m.Deleted,
               summary="Delete one reflection (a blob that absorbed it is merged again without it)",
               dependencies=[not_agent_key("deleting memory")])
def delete_reflection(agent_id: AgentId, user_id: UserId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Deleted:
    return _delete(agent_id, user_id, "reflection", item_id, caller, ctx)


def _delete(agent_id: str, user_id: str, kind: Literal["fact", "reflection"], item_id: str, caller: Principal,
            ctx: AppContext) -> m.Deleted:
    user = _user(caller, agent_id, user_id)
    subject = subject_digest(agent_id, user)
    return audited(ctx, caller, user_memory.delete_item(ctx.deps, agent_id, user, kind, item_id,
                                                        holder=f"delete:{subject}")).item


@router.post("/memory/facts/{item_id}/withdraw", response_model=m.Withdrawn,
             summary="Take the user's part out of a shared fact, which stays for the others",
             dependencies=[not_agent_key("withdrawing from memory")])
def withdraw_fact(agent_id: AgentId, user_id: UserId, item_id: ItemId, caller: Caller, ctx: Ctx) -> m.Withdrawn:
    return _withdraw(agent_id, user_id, "fact", item_id, caller, ctx)


@router.post("/memory/reflections/{item_id}/withdraw", response_model=m.Withdrawn,
             summary="Take the user's part out of a shared pending reflection, which stays for the others",
             dependencies=[not_agent_key("withdrawing from memory")])
def withdraw_reflection(agent_id: AgentId, user_id: UserId, item_id: ItemId, caller: Caller,
                        ctx: Ctx) -> m.Withdrawn:
    return _withdraw(agent_id, user_id, "reflection", item_id, caller, ctx)


def _withdraw(agent_id: str, user_id: str, kind: Literal["fact", "reflection"], item_id: str, caller: Principal,
              ctx: AppContext) -> m.Withdrawn:
    user = _user(caller, agent_id, user_id)
    return audited(ctx, caller, user_memory.withdraw_item(ctx.store, agent_id, user, kind, item_id,
                                                          ctx.clock.now())).item


@router.patch("/memory/reflections/{item_id}", response_model=m.MyReflection,
              summary="Edit one of the user's reflections waiting for consolidation, with history",
              dependencies=[not_agent_key("editing memory")])
def edit_reflection(agent_id: AgentId, user_id: UserId, item_id: ItemId, body: m.ReflectionEdit, caller: Caller,
                    ctx: Ctx) -> m.MyReflection:
    user = _user(caller, agent_id, user_id)
    return audited(ctx, caller, user_memory.edit_reflection(ctx.store, ctx.settings, agent_id, user, item_id,
                                                            body.content, by=caller.credential_id,
                                                            now=ctx.clock.now())).item


@router.put("/memory/blob/sections/{section}", response_model=m.MyBlob,
            summary="Rewrite one section of the user's own blob: a new version, screened, with history",
            dependencies=[not_agent_key("editing memory")])
def edit_blob_section(agent_id: AgentId, user_id: UserId, section: Annotated[str, Path(min_length=1, max_length=80)],
                      body: o.SectionLines, caller: Caller, ctx: Ctx) -> m.MyBlob:
    user = _user(caller, agent_id, user_id)
    blob = audited(ctx, caller, edit.edit_section(
        ctx.store, ctx.settings, agent_id, scope_key("user", user_id=user), section, body.bullets,
        by=caller.credential_id, now=ctx.clock.now(), subject=subject_digest(agent_id, user), people=[user],
        source="user")).item
    return m.MyBlob(content=blob.consolidated_content, version=blob.version,
                    last_consolidated_at=blob.last_consolidated_at)


@router.get("/memory-setting", response_model=m.UserMemorySetting, summary="Whether user memory is on",
            dependencies=[of_agent("reading a user's memory setting")])
def get_setting(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> m.UserMemorySetting:
    user = _user(caller, agent_id, user_id)
    return m.UserMemorySetting(agent_id=agent_id, user_id=user, enabled=edit.user_memory_on(ctx.store, agent_id, user))


@router.put("/memory-setting", response_model=m.UserMemorySetting,
            summary="Switch this user's memory with this agent off or on (items are kept)",
            dependencies=[not_agent_key("switching user memory")])
def put_setting(agent_id: AgentId, user_id: UserId, body: m.UserMemorySwitch, caller: Caller,
                ctx: Ctx) -> m.UserMemorySetting:
    user = _user(caller, agent_id, user_id)
    audited(ctx, caller, edit.switch_user_memory(ctx.store, agent_id, user, body.enabled, ctx.clock.now()))
    return m.UserMemorySetting(agent_id=agent_id, user_id=user, enabled=body.enabled)


@router.get("/export", summary="Everything stored about this user under this agent, as JSON Lines",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                             "description": "one JSON object per line: {collection, document}"}},
            dependencies=[not_agent_key("exporting memory")])
def export(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> StreamingResponse:
    user = _user(caller, agent_id, user_id)
    found = audited(ctx, caller, exporting.export_user(ctx.store, user, agent_id))
    return StreamingResponse(found.lines, media_type="application/x-ndjson")


@router.post("/forget", response_model=m.JobOut, status_code=202,
             summary="Erase everything of this user under this agent: a queued job",
             dependencies=[not_agent_key("erasure")])
def forget(agent_id: AgentId, user_id: UserId, caller: Caller, ctx: Ctx) -> m.JobOut:
    return queue_forget(ctx, caller, _user(caller, agent_id, user_id), agent_id)
