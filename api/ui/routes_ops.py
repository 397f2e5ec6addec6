"""The inspector's operator pages (design §12): the search playground, runs with their stage
timelines and replay, cost as a chart, and erasure (plan, typed confirmation, verify) and
export. Runs, cost and erasure need an admin key, as in the HTTP API; the playground searches
as the credential reaches (``api.access.reach``).

Queries and people's ids travel in POST bodies, never in a URL or an access log.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import StreamingResponse

from api.access import reach, require_admin
from api.audit import audit
from api.ui import erasure, views
from api.ui.routes import Id, Who, _ctx
from api.ui.web import FormId, QueryId, UiError, UiRoute, check_csrf, page, parse_as_of
from ops.caps import caps_report
from ops.cost import cost_report
from ops.runs import REPLAYABLE, list_run_summaries, replay_failed, run_summary
from schemas.access import subject_digest
from workers.deps import provider_limits

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)
Csrf = Depends(check_csrf)
Field = FormId
RunStatus = Literal["", "claimed", "running", "done", "failed", "dead", "erased"]


# ------------------------------------------------------------------------ search ----------
@router.get("/search")
def search_form(request: Request, who: Who):
    return page(request, "search.html", who, form={}, answer=None)


@router.post("/search", dependencies=[Csrf])
def search(request: Request, who: Who, agent_id: Field, session_id: Field, query: Annotated[str, Form(max_length=2000)],
           user_id: Field = "", as_of: Annotated[str, Form(max_length=40)] = "",
           top_k: Annotated[int, Form(ge=1, le=50)] = 10):
    ctx = _ctx(request)
    if not query.strip():
        raise UiError(422, "invalid request", "form query", "the query is blank")
    found = reach(who.principal, agent_id.strip(), user_id=user_id.strip() or None, session_id=session_id.strip(),
                  user_where="form user_id", session_where="form session_id", sessions=ctx.store)
    answer = ctx.service(found.agent_id).search_facts(
        query, session_id=found.session_id, user_id=found.user_id, top_k=top_k, debug=True,
        as_of=parse_as_of(as_of, "form as_of"))
    debug = answer["debug"]
    timings = {k: v for k, v in debug["timings_ms"].items() if isinstance(v, (int, float)) and k != "total"}
    return page(request, "search.html", who, answer=answer, debug=debug, branches=views.branch_rows(ctx.store, debug),
                timing_bars=views.bars(timings, float), total_ms=debug["timings_ms"].get("total"),
                form={"agent_id": agent_id, "session_id": session_id, "user_id": user_id, "query": query,
                      "as_of": as_of, "top_k": top_k})


# ------------------------------------------------------------------------ runs ------------
@router.get("/runs")
def runs(request: Request, who: Who, status: RunStatus = "", agent: QueryId = "",
         session: QueryId = "", since: Annotated[str, Query(max_length=40)] = "",
         limit: Annotated[int, Query(ge=1, le=1000)] = 100):
    require_admin(who.principal, "runs")
    after = parse_as_of(since, "query since")
    found = list_run_summaries(_ctx(request).store, status=status or None, agent_id=agent or None,
                               session_id=session or None, limit=limit)
    if after is not None:
        found = [r for r in found if r["created_at"] >= after.isoformat()]
    settings = _ctx(request).settings
    return page(request, "runs.html", who, runs=found, limits=provider_limits(settings) if settings.llm_rate_limits else {},
                filters={"status": status, "agent": agent, "session": session, "since": since, "limit": limit})


@router.get("/runs/{run_id}")
def run_page(request: Request, who: Who, run_id: Id, replayed: bool = False):
    require_admin(who.principal, "runs")
    ctx = _ctx(request)
    run = ctx.store.runs.get_run(run_id)
    if run is None:
        raise UiError(404, "not found", "path run_id", "no such run (erased, or never stored)")
    messages = ctx.store.ingest.get_messages(run.session_id, run.seq_from, run.seq_to)
    return page(request, "run.html", who, messages=messages, replayable=run.status in REPLAYABLE,
                replayed=replayed, **views.run_detail(run, run_summary(run)))


@router.post("/runs/{run_id}/replay", dependencies=[Csrf])
def replay(request: Request, who: Who, run_id: Id):
    require_admin(who.principal, "replaying runs")
    ctx, p = _ctx(request), who.principal
    result = replay_failed(ctx.store, ctx.clock.now(), ctx.settings.claim_lease_s, ctx.start_run, run_ids=[run_id])
    audit(ctx.store, ctx.clock.now(), p.credential_id, p.kind, "replay_failed",
          counts={"replayed": len(result["replayed"]), "skipped": len(result["skipped"])})
    return page(request, "replayed.html", who, run_id=run_id, result=result)


# ------------------------------------------------------------------------ cost ------------
@router.get("/cost")
def cost(request: Request, who: Who, agent: QueryId = "", since: Annotated[str, Query(max_length=40)] = ""):
    require_admin(who.principal, "reading cost")
    agents = [a.agent_id for a in views.agents(_ctx(request).store)]
    # the form's select shows the first agent when none is asked for: show that agent's cost
    agent = agent or (agents[0] if agents else "")
    if agent and agent not in agents:  # an agent opened by its id is the one the select shows
        agents.insert(0, agent)
    charts = {}
    after = parse_as_of(since, "query since")
    if agent:
        for by in ("model", "stage", "day"):
            report = cost_report(_ctx(request).store, agent, since=after, by=by)
            charts[by] = {"report": report, "usd": views.bars(report["groups"], lambda g: g.get("usd") or 0.0),
                          "tokens": views.bars(report["groups"], _tokens)}
    ctx = _ctx(request)
    caps = caps_report(ctx.store, ctx.settings, ctx.clock.now(), agent or None)
    return page(request, "cost.html", who, agent=agent, since=since, charts=charts, agents=agents, caps=caps)


def _tokens(group: dict) -> int:
    return sum(r["input_tokens"] + r["output_tokens"] for r in group["by_model"].values())


# ------------------------------------------------------------------------ erasure ---------
@router.get("/erasure")
def erasure_form(request: Request, who: Who):
    require_admin(who.principal, "erasure")
    return page(request, "erasure.html", who, plan=None, result=None, form={})


def _target(user_id: str, agent_id: str, every_agent: bool) -> tuple[str, str | None]:
    if not user_id.strip():
        raise UiError(422, "invalid request", "form user_id", "a user id is required")
    if not every_agent and not agent_id.strip():
        raise UiError(422, "invalid request", "form agent_id", "name the agent, or tick every agent")
    return user_id.strip(), None if every_agent else agent_id.strip()


@router.post("/erasure/plan", dependencies=[Csrf])
def erasure_plan(request: Request, who: Who, user_id: Field, agent_id: Field = "",
                 every_agent: Annotated[bool, Form()] = False):
    require_admin(who.principal, "erasure")
    user, agent = _target(user_id, agent_id, every_agent)
    return page(request, "erasure.html", who, plan=erasure.plan(_ctx(request).store, user, agent), result=None,
                form={"user_id": user, "agent_id": agent or "", "every_agent": every_agent})


@router.post("/erasure/forget", dependencies=[Csrf])
def erasure_forget(request: Request, who: Who, user_id: Field, confirm: Field, agent_id: Field = "",
                   every_agent: Annotated[bool, Form()] = False):
    require_admin(who.principal, "erasure")
    user, agent = _target(user_id, agent_id, every_agent)
    form = {"user_id": user, "agent_id": agent or "", "every_agent": every_agent}
    ctx, p = _ctx(request), who.principal
    if confirm.strip() != user:
        return page(request, "erasure.html", who, status=422, plan=erasure.plan(ctx.store, user, agent), result=None,
                    form=form, refused="the confirmation does not match the user id: nothing was erased")
    result = erasure.forget(ctx.store, ctx.settings, user, agent)
    audit(ctx.store, ctx.clock.now(), p.credential_id, p.kind, "forget_user", agent_id=agent,
          subject=subject_digest(agent, user), outcome="ok" if not result["traces"] else "traces_left",
          counts=result["deleted"])
    return page(request, "erasure.html", who, plan=None, result=result, form=form)


@router.post("/erasure/export", dependencies=[Csrf])
def erasure_export(request: Request, who: Who, user_id: Field, agent_id: Field = "",
                   every_agent: Annotated[bool, Form()] = False):
    require_admin(who.principal, "export-user")
    user, agent = _target(user_id, agent_id, every_agent)
    ctx, p = _ctx(request), who.principal
    audit(ctx.store, ctx.clock.now(), p.credential_id, p.kind, "export_user", agent_id=agent,
          subject=subject_digest(agent, user))
    # the file name carries the pseudonym, not the user id
    name = f"export-{subject_digest(agent, user)[:12]}.jsonl"
    return StreamingResponse(erasure.export(ctx.store, user, agent), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})
