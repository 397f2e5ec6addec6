"""The agent runtime's routes (design §6): context, search, publish, session start and end,
stats and consolidation status, under ``/v1/agents/{agent_id}``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import Response

from api.access import reach
from api.auth import Principal, caller
from api.strict import known_query_only
from api.context import AppContext, app_context
from api.context_view import structured
from api.errors import Forbidden
from api.permissions import key, of_agent
from pipeline.search.filter_text import metadata_object
from schemas import api as m
from schemas.events import Id

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["memory"], responses=m.ERRORS, dependencies=[Depends(known_query_only)])

AgentId = Annotated[Id, Path()]
SessionId = Annotated[Id, Path()]
UserQuery = Annotated[Id | None, Query(description="the user; with a user token, the token's (default) and no other")]
Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]

_CONTEXT_RESPONSES = {200: {"content": {
    "application/xml": {"schema": {"type": "string"}},
    "application/json": {"schema": {"$ref": "#/components/schemas/MemoryContext"}},
}, "description": "the memory context: XML (format=xml) or the same memory as data (format=json)"}}


@router.get("/sessions/{session_id}/context", response_class=Response, responses=_CONTEXT_RESPONSES,
            summary="The memory context for this session and user", dependencies=[of_agent("reading memory")])
def get_context(
    agent_id: AgentId, session_id: SessionId, caller: Caller, ctx: Ctx, user_id: UserQuery = None,
    format: Literal["xml", "json"] = "xml",
    max_tokens: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    as_of: m.Instant | None = None, force_refresh: bool = False,
    categories: Annotated[list[str] | None, Query(alias="category", description=(
        "show only facts filed under this category of the agent; repeat for any of several"))] = None,
    metadata: Annotated[str | None, Query(max_length=8000, description=(
        'show only facts holding these metadata values: a JSON object, e.g. {"project": "apollo", '
        '"tier": [1, 2]} (each key a filterable key of the agent; a list: any of its values)'))] = None,
) -> Response:
    where = reach(caller, agent_id, user_id=user_id, session_id=session_id, sessions=ctx.store)
    narrowed = {"categories": categories, "metadata": metadata_object(metadata)}
    if format == "xml":
        return Response(ctx.service(agent_id).get_memory_context(
            session_id=session_id, user_id=where.user_id, force_refresh=force_refresh, max_tokens=max_tokens,
            as_of=as_of, **narrowed), media_type="application/xml")
    block = ctx.service(agent_id).memory_context(
        session_id=session_id, user_id=where.user_id, force_refresh=force_refresh, max_tokens=max_tokens, as_of=as_of,
        **narrowed,
    )
    data = structured(block, agent_id=agent_id, session_id=session_id, user_id=where.user_id)
    return Response(data.model_dump_json(), media_type="application/json")


@router.post("/sessions/{session_id}/search", response_model=m.SearchResponse, summary="search_facts",
             dependencies=[of_agent("searching memory")])
def search(agent_id: AgentId, session_id: SessionId, body: m.SearchRequest, caller: Caller, ctx: Ctx) -> m.SearchResponse:
    where = reach(caller, agent_id, user_id=body.user_id, session_id=session_id, user_where="body user_id",
                  sessions=ctx.store)
    found = ctx.service(agent_id).find_facts(
        body.query, session_id=session_id, user_id=where.user_id, top_k=body.top_k, debug=body.debug, as_of=body.as_of,
        categories=body.categories, metadata=body.metadata,
    )
    return m.SearchResponse(results=found.hits, debug=found.debug)


@router.post("/sessions/{session_id}/messages", response_model=m.Published, status_code=202,
             summary="Publish messages (fire-and-forget: accepted once the broker holds them)",
             dependencies=[of_agent("publishing")])
def publish(agent_id: AgentId, session_id: SessionId, body: m.PublishRequest, caller: Caller, ctx: Ctx) -> m.Published:
    messages = [msg.model_dump(exclude_none=True) for msg in body.messages]
    users = list(body.session_users)
    senders = [msg["sender_id"] for msg in messages if msg["role"] == "user" and msg.get("sender_id")]
    reach(caller, agent_id, session_id=session_id, sessions=ctx.store, humans=[*users, *senders], starts=True,
          needs="publish")
    if caller.kind == "user":
        # a user token speaks for its user alone: their own messages, in a session of theirs
        for i, msg in enumerate(messages):
            if msg["role"] != "user":
                raise Forbidden("a user token publishes the user's own messages (role user) only",
                                f"body messages[{i}].role")
            if msg.setdefault("sender_id", caller.user_id) != caller.user_id:
                raise Forbidden("a user token publishes the user's own messages only", f"body messages[{i}].sender_id")
        if any(u != caller.user_id for u in users):
            raise Forbidden("a user token cannot declare other users", "body session_users")
    count = ctx.service(agent_id).maybe_form_memories(
        messages, session_id=session_id, session_users=users, user_tier=body.user_tier, preview=body.preview,
        agent_name=body.agent_name,
    )
    return m.Published(published=count)


@router.post("/sessions/{session_id}/start", response_model=m.Accepted, summary="on_session_start",
             dependencies=[key("starting a session")])
def start_session(agent_id: AgentId, session_id: SessionId, body: m.SessionStart, caller: Caller, ctx: Ctx) -> m.Accepted:
    reach(caller, agent_id, session_id=session_id, sessions=ctx.store, humans=body.user_ids, needs="publish")
    ctx.service(agent_id).on_session_start(session_id=session_id, user_ids=body.user_ids)
    return m.Accepted()


@router.post("/sessions/{session_id}/end", response_model=m.Accepted, status_code=202, summary="on_session_end",
             dependencies=[key("ending a session")])
def end_session(agent_id: AgentId, session_id: SessionId, caller: Caller, ctx: Ctx) -> m.Accepted:
    reach(caller, agent_id, session_id=session_id, sessions=ctx.store, needs="publish")
    ctx.service(agent_id).on_session_end(session_id=session_id)
    return m.Accepted()


@router.get("/stats", response_model=m.Stats, summary="get_memory_stats", dependencies=[of_agent("reading stats")])
def stats(agent_id: AgentId, caller: Caller, ctx: Ctx, user_id: UserQuery = None,
          session_id: Annotated[Id | None, Query()] = None) -> m.Stats:
    where = reach(caller, agent_id, user_id=user_id, session_id=session_id, session_where="query session_id",
                  sessions=ctx.store)
    return m.Stats.model_validate(ctx.service(agent_id).get_memory_stats(user_id=where.user_id, session_id=where.session_id))


@router.get("/status", response_model=m.Stats, summary="get_consolidation_status",
            dependencies=[of_agent("reading the consolidation status")])
def status(agent_id: AgentId, caller: Caller, ctx: Ctx, user_id: UserQuery = None,
           session_id: Annotated[Id | None, Query()] = None) -> m.Stats:
    where = reach(caller, agent_id, user_id=user_id, session_id=session_id, session_where="query session_id",
                  sessions=ctx.store)
    payload = ctx.service(agent_id).get_consolidation_status(user_id=where.user_id, session_id=where.session_id)
    if ctx.settings.llm_rate_limits:  # what the shared provider limits hold back now (design §8)
        from usecases.limits import provider_limits

        payload["provider_limits"] = provider_limits(ctx.settings)
    return m.Stats.model_validate(payload)
