"""Direct writes and import (design §13), under ``/v1/agents/{agent_id}``: a fact or a reflection
stored verbatim with no model call (``usecases.writes``), and JSON Lines imported as they stream
in (``usecases.imports``).

Who writes where: the agent's shared memory (and a session's buffer) is the owner's (an admin
key, or an agent key with the ``curate`` scope); a user's memory is the owner's and that user's
own (their token writes their memory only, as it edits it). The runtime's key (read, publish)
writes nothing. Every write is audited without content and answers 201 with the stored item; a
text the scope already holds is 409, naming the item that holds it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from api import user_memory
from api.access import reach, require_curator
from api.audit import audited
from api.auth import Principal, caller
from api.permissions import curator, of_agent
from api.context import AppContext, app_context
from api.errors import ApiError
from api.limits import import_limit
from api.routes_memory import AgentId
from api.routes_users import UserId
from api.strict import known_query_only
from schemas import api as m
from schemas import api_writes as w
from schemas.imports import SimpleLine
from usecases import writes
from usecases.import_lines import LineSplitter
from usecases.imports import ImportSummary, Importer

router = APIRouter(prefix="/v1/agents/{agent_id}", tags=["owner"], responses=m.ERRORS,
                   dependencies=[Depends(known_query_only)])

Caller = Annotated[Principal, Depends(caller)]
Ctx = Annotated[AppContext, Depends(app_context)]
CREATED = {409: {"model": m.Problem, "description": "the scope holds this text already: `why` names the item"}}


def _user_writer(p: Principal, agent_id: str, user_id: str) -> writes.WriteSource:
    """``user`` for the user's own token, ``owner`` for a curator or admin; anyone else 403."""
    if p.kind == "user":
        reach(p, agent_id, user_id=user_id, user_where="path user_id")
        return "user"
    require_curator(p, agent_id, "writing a user's memory")
    return "owner"


def _fact(ctx: AppContext, who: Principal, agent_id: str, user_id: str | None, body: w.FactAdd,
          source: writes.WriteSource) -> m.MyFact:
    fact = audited(ctx, who, writes.written(writes.add_fact(ctx.service(agent_id), writes.FactWrite(
        agent_id, body.content, source, user_id=user_id, expires_at=body.expires_at,
        categories=body.categories, metadata=body.metadata)))).item
    return user_memory.fact_out(fact, True)


def _reflection(ctx: AppContext, who: Principal, agent_id: str, user_id: str | None, body: w.ReflectionAdd,
                source: writes.WriteSource) -> m.MyReflection:
    reflection = audited(ctx, who, writes.written(writes.add_reflection(ctx.service(agent_id), writes.ReflectionWrite(
        agent_id, body.content, source, user_id=user_id, session_id=body.session_id)))).item
    return user_memory.reflection_out(reflection, True)


@router.post("/memory/facts", response_model=m.MyFact, status_code=201, responses=CREATED,
             summary="Add a fact to the agent's shared memory, verbatim (no model call): screened, embedded",
             dependencies=[curator("writing the agent's memory")])
def add_agent_fact(agent_id: AgentId, body: w.FactAdd, caller: Caller, ctx: Ctx) -> m.MyFact:
    return _fact(ctx, caller, agent_id, None, body, "owner")


@router.post("/memory/reflections", response_model=m.MyReflection, status_code=201, responses=CREATED,
             summary="Add a reflection to the agent's (or a session's) buffer, merged at the next consolidation",
             dependencies=[curator("writing the agent's memory")])
def add_agent_reflection(agent_id: AgentId, body: w.ReflectionAdd, caller: Caller, ctx: Ctx) -> m.MyReflection:
    return _reflection(ctx, caller, agent_id, None, body, "owner")


@router.post("/users/{user_id}/memory/facts", response_model=m.MyFact, status_code=201, responses=CREATED,
             summary="Add a fact to a user's memory, verbatim: by an owner, or by the user themself",
             dependencies=[of_agent("the user's own token, or a curator: _user_writer decides")])
def add_user_fact(agent_id: AgentId, user_id: UserId, body: w.FactAdd, caller: Caller, ctx: Ctx) -> m.MyFact:
    return _fact(ctx, caller, agent_id, user_id, body, _user_writer(caller, agent_id, user_id))


@router.post("/users/{user_id}/memory/reflections", response_model=m.MyReflection, status_code=201,
             responses=CREATED, summary="Add a reflection to a user's buffer: by an owner, or by the user themself",
             dependencies=[of_agent("the user's own token, or a curator: _user_writer decides")])
def add_user_reflection(agent_id: AgentId, user_id: UserId, body: w.ReflectionAdd, caller: Caller,
                        ctx: Ctx) -> m.MyReflection:
    return _reflection(ctx, caller, agent_id, user_id, body, _user_writer(caller, agent_id, user_id))


#: the body is bytes cut into lines, each checked on its own (a bad line is a reject in the
#: answer, never the whole request's 422), so the document constrains no type and describes them
_IMPORT_BODY = {
    "required": True,
    "content": {"application/x-ndjson": {"schema": {
        "description": "JSON Lines: export-user records (with `kind`), or simple lines with "
                       f"{', '.join(SimpleLine.model_fields)}: one JSON object a line"}}},
}


@router.post("/import", response_model=w.ImportReport, summary="Import JSON Lines: export-user records or simple "
             "{user_id, text} lines, streamed; every good line kept, each bad one reported",
             openapi_extra={"requestBody": _IMPORT_BODY},
             responses={413: {"model": m.Problem, "description": "the body is larger than the import limit"}},
             dependencies=[curator("importing memory")])
async def import_lines(agent_id: AgentId, request: Request, caller: Caller, ctx: Ctx) -> w.ImportReport:
    importer = Importer(ctx.service(agent_id), agent_id, by=caller.credential_id)
    splitter, seen, limit = LineSplitter(), 0, import_limit(ctx.api_settings)
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            audited(ctx, caller, importer)
            raise ApiError("request too large", "body", f"more than {limit} bytes; the first {importer.line} lines "
                           "were imported (importing them again changes nothing): send the rest apart", status=413)
        if lines := splitter.feed(chunk):
            await run_in_threadpool(importer.feed, lines)
    if not seen:
        raise ApiError("invalid request", "body", "empty: an import reads JSON Lines, one JSON object a line",
                       status=422)
    await run_in_threadpool(importer.feed, splitter.end())
    audited(ctx, caller, importer)
    return report(agent_id, importer.summary)


def report(agent_id: str, summary: ImportSummary) -> w.ImportReport:
    return w.ImportReport(agent_id=agent_id, added=summary.added, updated=summary.updated,
                          unchanged=summary.unchanged, exists=summary.exists, skipped=summary.skipped,
                          rejected=summary.rejected, added_by_kind=summary.by_kind,
                          rejects=[w.ImportReject(line=r.line, field=r.field or "line", why=r.why or "")
                                   for r in summary.rejects],
                          skips=[w.ImportSkip(line=r.line, why=r.why or "") for r in summary.skips])
