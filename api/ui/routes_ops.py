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

from api.access import reach
from api.audit import audited
from api.ui import views
from api.ui.routes import Id, Who
from api.ui.web import Ctx, FormId, QueryId, UiError, any_viewer, check_csrf, only_admin, page, parse_as_of
from pipeline.search.filter_text import metadata_pairs
from usecases import erase, export as exporting
from usecases.caps import caps_report
from usecases.cost import cost_report
from usecases.runs import REPLAYABLE, list_run_summaries, replay_failed, run_detail
from usecases.limits import provider_limits

router = APIRouter(prefix="/ui", include_in_schema=False)
Csrf = Depends(check_csrf)
Field = FormId
RunStatus = Literal["", "claimed", "running", "done", "failed", "dead", "erased"]


# ------------------------------------------------------------------------ search ----------
@router.get("/search", dependencies=[any_viewer("the form; searching is reached per request")])
def search_form(request: Request, who: Who, ctx: Ctx, agent_id: QueryId = ""):
    agent = who.principal.agent_id or agent_id
    return page(request, "search.html", who, form={"agent_id": agent}, answer=None,
                category_names=views.category_choices(ctx.store, agent))


@router.post("/search", dependencies=[Csrf, any_viewer("api.access.reach decides, by the form's ids")])
def search(request: Request, who: Who, ctx: Ctx, agent_id: Field, session_id: Field,
           query: Annotated[str, Form(max_length=2000)],
           user_id: Field = "", as_of: Annotated[str, Form(max_length=40)] = "",
           top_k: Annotated[int, Form(ge=1, le=50)] = 10,
           categories: Annotated[list[str], Form(max_length=50)] = [],  # noqa: B006 - FastAPI copies defaults
           metadata: Annotated[str, Form(max_length=4000)] = ""):
    if not query.strip():
        raise UiError(422, "invalid request", "form query", "the query is blank")
    found = reach(who.principal, agent_id.strip(), user_id=user_id.strip() or None, session_id=session_id.strip(),
                  user_where="form user_id", session_where="form session_id", sessions=ctx.store)
    answer = ctx.service(found.agent_id).search_facts(
        query, session_id=found.session_id, user_id=found.user_id, top_k=top_k, debug=True,
        as_of=parse_as_of(as_of, "form as_of"), categories=categories or None,
        metadata=metadata_pairs([line for line in metadata.splitlines() if line.strip()]))
    debug = answer["debug"]
    timings = {k: v for k, v in debug["timings_ms"].items() if isinstance(v, (int, float)) and k != "total"}
    return page(request, "search.html", who, answer=answer, debug=debug, branches=views.branch_rows(ctx.store, debug),
                timing_bars=views.bars(timings, float), total_ms=debug["timings_ms"].get("total"),
                category_names=views.category_choices(ctx.store, found.agent_id),
                form={"agent_id": agent_id, "session_id": session_id, "user_id": user_id, "query": query,
                      "as_of": as_of, "top_k": top_k, "categories": categories, "metadata": metadata})


# ------------------------------------------------------------------------ runs ------------
@router.get("/runs", dependencies=[only_admin("runs")])
def runs(request: Request, who: Who, ctx: Ctx, status: RunStatus = "", agent: QueryId = "",
         session: QueryId = "", since: Annotated[str, Query(max_length=40)] = "",
         limit: Annotated[int, Query(ge=1, le=1000)] = 100):
    after = parse_as_of(since, "query since")
    found = list_run_summaries(ctx.store, status=status or None, agent_id=agent or None,
                               session_id=session or None, limit=limit)
    if after is not None:
        found = [r for r in found if r["created_at"] >= after.isoformat()]
    settings = ctx.settings
    return page(request, "runs.html", who, runs=found, limits=provider_limits(settings) if settings.llm_rate_limits else {},
                filters={"status": status, "agent": agent, "session": session, "since": since, "limit": limit})


@router.get("/runs/{run_id}", dependencies=[only_admin("runs")])
def run_page(request: Request, who: Who, ctx: Ctx, run_id: Id, replayed: bool = False):
    found = run_detail(ctx.store, run_id)
    if found is None:
        raise UiError(404, "not found", "path run_id", "no such run (erased, or never stored)")
    return page(request, "run.html", who, messages=found.messages, replayable=found.run.status in REPLAYABLE,
                replayed=replayed, **views.run_detail(found.run, found.summary))


@router.post("/runs/{run_id}/replay", dependencies=[Csrf, only_admin("replaying runs")])
def replay(request: Request, who: Who, ctx: Ctx, run_id: Id):
    result = audited(ctx, who.principal, replay_failed(ctx.store, ctx.clock.now(), ctx.settings.claim_lease_s,
                                                       ctx.start_run, run_ids=[run_id]))
    return page(request, "replayed.html", who, run_id=run_id, result=result.report)


# ------------------------------------------------------------------------ cost ------------
@router.get("/cost", dependencies=[only_admin("reading cost")])
def cost(request: Request, who: Who, ctx: Ctx, agent: QueryId = "", since: Annotated[str, Query(max_length=40)] = ""):
    agents = [a.agent_id for a in views.agents(ctx.store)]
    # the form's select shows the first agent when none is asked for: show that agent's cost
    agent = agent or (agents[0] if agents else "")
    if agent and agent not in agents:  # an agent opened by its id is the one the select shows
        agents.insert(0, agent)
    charts = {}
    after = parse_as_of(since, "query since")
    if agent:
        for by in ("model", "stage", "day"):
            report = cost_report(ctx.store, agent, since=after, by=by)
            charts[by] = {"report": report, "usd": views.bars(report["groups"], lambda g: g.get("usd") or 0.0),
                          "tokens": views.bars(report["groups"], _tokens)}
    caps = caps_report(ctx.store, ctx.settings, ctx.clock.now(), agent or None)
    return page(request, "cost.html", who, agent=agent, since=since, charts=charts, agents=agents, caps=caps)


def _tokens(group: dict) -> int:
    return sum(r["input_tokens"] + r["output_tokens"] for r in group["by_model"].values())


# ------------------------------------------------------------------------ erasure ---------
@router.get("/erasure", dependencies=[only_admin("erasure")])
def erasure_form(request: Request, who: Who):
    return page(request, "erasure.html", who, plan=None, result=None, form={})


def _target(user_id: str, agent_id: str, every_agent: bool) -> tuple[str, str | None]:
    if not user_id.strip():
        raise UiError(422, "invalid request", "form user_id", "a user id is required")
    if not every_agent and not agent_id.strip():
        raise UiError(422, "invalid request", "form agent_id", "name the agent, or tick every agent")
    return user_id.strip(), None if every_agent else agent_id.strip()


@router.post("/erasure/plan", dependencies=[Csrf, only_admin("erasure")])
def erasure_plan(request: Request, who: Who, ctx: Ctx, user_id: Field, agent_id: Field = "",
                 every_agent: Annotated[bool, Form()] = False):
    user, agent = _target(user_id, agent_id, every_agent)
    return page(request, "erasure.html", who, plan=erase.plan(ctx.store, user, agent), result=None,
                form={"user_id": user, "agent_id": agent or "", "every_agent": every_agent})


@router.post("/erasure/forget", dependencies=[Csrf, only_admin("erasure")])
def erasure_forget(request: Request, who: Who, ctx: Ctx, user_id: Field, confirm: Field, agent_id: Field = "",
                   every_agent: Annotated[bool, Form()] = False):
    user, agent = _target(user_id, agent_id, every_agent)
    form = {"user_id": user, "agent_id": agent or "", "every_agent": every_agent}
    if confirm.strip() != user:
        return page(request, "erasure.html", who, status=422, plan=erase.plan(ctx.store, user, agent), result=None,
                    form=form, refused="the confirmation does not match the user id: nothing was erased")
    # erased now, then checked as ``forget-user --verify`` checks: items nobody can attribute listed apart
    found = audited(ctx, who.principal, erase.forget_user(ctx.store, user, agent, settings=ctx.settings, check=True))
    result = {"deleted": dict(sorted(found.counts.items())), "traces": found.traces,
              "unattributed": found.unattributed}
    return page(request, "erasure.html", who, plan=None, result=result, form=form)


@router.post("/erasure/export", dependencies=[Csrf, only_admin("export-user")])
def erasure_export(request: Request, who: Who, ctx: Ctx, user_id: Field, agent_id: Field = "",
                   every_agent: Annotated[bool, Form()] = False):
    user, agent = _target(user_id, agent_id, every_agent)
    found = audited(ctx, who.principal, exporting.export_user(ctx.store, user, agent))
    # the file name carries the pseudonym, not the user id
    return StreamingResponse(found.lines, media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{found.file_name}"'})
