"""The inspector's owner pages (design §13 "Owner controls"): an agent's overview and its
curation page, whose forms edit and delete shared facts (with their expiry and metadata) and
pending shared reflections, rewrite the shared blob's sections, set, clear and roll back Memory
Instructions, and pause and resume formation (backfill chosen explicitly).

Reach is the owner routes' (``api.permissions.curator``, declared on each route): an admin key, or an agent key of
that agent with the ``curate`` scope. Every form carries the CSRF token and passes the origin
check (``api.ui.web.check_csrf``), then calls the JSON route's own handler with the same body
model, so that the checks, the audit entry and the cache invalidation are those of the HTTP API,
not a second copy of them. A refusal is an error page naming the form's field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ValidationError

from api import routes_curation, routes_owner
from api.errors import ApiError
from api.ui import owner_views
from api.ui.forms import expiry_change, metadata_change
from api.ui.routes import Id, Who
from api.ui.web import Ctx, FormId, UiError, check_csrf, only_curator, page
from pipeline.errors import InvalidInput
from schemas import api as m
from schemas import api_owner as o
from schemas.owner import InstructionScope, InstructionStage

router = APIRouter(prefix="/ui/agents/{agent_id}", include_in_schema=False)
Csrf = Depends(check_csrf)
Text = Annotated[str, Form(min_length=1, max_length=4000)]
Target = Annotated[Literal["all", "agent", "session"], Form()]

#: what the curation page confirms after a change (``?done=``; never the text itself in a URL)
DONE = {"fact": "Saved: the fact is a new version; the old text is in its history.",
        "fact-deleted": "Deleted the fact, with its history.",
        "reflection": "Saved: the waiting reflection reads as you wrote it.",
        "reflection-deleted": "Deleted the waiting reflection.",
        "section": "Saved: the shared summary is a new version, with you as its source.",
        "instruction": "Saved: the instruction is a new version.",
        "paused": "Paused: nothing new is formed there until you resume; content and messages are kept.",
        "resumed": "Resumed without backfill: messages of the pause stay unformed.",
        "backfilled": "Resumed with backfill: the messages of the pause are being formed."}


def _body(model: type[BaseModel], **values) -> BaseModel:
    """A JSON route's body model from form fields: a value it refuses is a page naming the
    form's field, as a bad JSON body is a 422 naming the body's."""
    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "?"
        raise UiError(422, "invalid request", _form_field(field), first.get("msg", "not valid")) from None


#: a JSON body's field as this page's form calls it, where the names differ
FORM_NAMES = {"expires_at": "expires", "bullets": "lines"}


def _form_field(where: str) -> str:
    field = where.removeprefix("body ")
    return f"form {FORM_NAMES.get(field, field)}"


def _call(handler, **arguments):
    """The JSON route's handler; its refusal names the body's field, which reads as the form's
    (``body content`` is ``form content``)."""
    try:
        return handler(**arguments)
    except ApiError as exc:
        where = _form_field(exc.where) if exc.where.startswith("body ") else exc.where
        raise UiError(exc.status, exc.what, where, exc.why) from None
    except InvalidInput as exc:  # a pipeline rule names the body's field bare ("content", "expires_at")
        raise UiError(422, "invalid input", _form_field(exc.field), exc.reason) from None


def _done(agent_id: str, key: str) -> RedirectResponse:
    return RedirectResponse(f"/ui/agents/{agent_id}/curate?done={key}", status_code=303)



# ------------------------------------------------------------------------ pages -----------
@router.get("/overview", dependencies=[only_curator("an agent's overview")])
def overview(request: Request, who: Who, ctx: Ctx, agent_id: Id):
    return page(request, "overview.html", who, **owner_views.overview(ctx.store, agent_id, ctx.clock.now()))


@router.get("/curate", dependencies=[only_curator("curating memory")])
def curate(request: Request, who: Who, ctx: Ctx, agent_id: Id, done: Annotated[str, Query(max_length=30)] = ""):
    return page(request, "curate.html", who, done=DONE.get(done), **owner_views.curation(ctx.store, agent_id,
                                                                                         ctx.clock.now()))


# ------------------------------------------------------------------------ facts -----------
@router.post("/curate/facts/{item_id}/edit", dependencies=[Csrf, only_curator("curating memory")])
def edit_fact(request: Request, who: Who, ctx: Ctx, agent_id: Id, item_id: Id, content: Text,
              expires: Annotated[str, Form(max_length=40)] = "", no_expiry: Annotated[bool, Form()] = False,
              metadata: Annotated[str, Form(max_length=4000)] = "",
              metadata_shown: Annotated[str, Form(max_length=4000)] = ""):
    body = _body(m.FactEdit, content=content, **expiry_change(expires, no_expiry),
                 **metadata_change(metadata, metadata_shown))
    _call(routes_curation.edit_fact, agent_id=agent_id, item_id=item_id, body=body, caller=who.principal, ctx=ctx)
    return _done(agent_id, "fact")


@router.post("/curate/{kind}/{item_id}/delete", dependencies=[Csrf, only_curator("curating memory")])
def delete_item(request: Request, who: Who, ctx: Ctx, agent_id: Id, kind: Literal["facts", "reflections"], item_id: Id):
    handler = routes_curation.delete_fact if kind == "facts" else routes_curation.delete_reflection
    _call(handler, agent_id=agent_id, item_id=item_id, caller=who.principal, ctx=ctx)
    return _done(agent_id, "fact-deleted" if kind == "facts" else "reflection-deleted")


@router.post("/curate/reflections/{item_id}/edit", dependencies=[Csrf, only_curator("curating memory")])
def edit_reflection(request: Request, who: Who, ctx: Ctx, agent_id: Id, item_id: Id, content: Text):
    _call(routes_curation.edit_reflection, agent_id=agent_id, item_id=item_id,
          body=_body(m.ReflectionEdit, content=content), caller=who.principal, ctx=ctx)
    return _done(agent_id, "reflection")


@router.post("/curate/section", dependencies=[Csrf, only_curator("curating memory")])
def edit_section(request: Request, who: Who, ctx: Ctx, agent_id: Id,
                 section: Annotated[str, Form(min_length=1, max_length=80)],
                 lines: Annotated[str, Form(max_length=20_000)] = ""):
    """One section of the shared summary, one line per bullet; no lines removes the section."""
    bullets = [line.strip().removeprefix("- ").strip() for line in lines.splitlines() if line.strip()]
    _call(routes_curation.edit_section, agent_id=agent_id, section=section.strip(),
          body=_body(o.SectionEdit, bullets=bullets), caller=who.principal, ctx=ctx)
    return _done(agent_id, "section")


# ------------------------------------------------------------------ instructions ----------
@router.post("/instructions", dependencies=[Csrf, only_curator("changing instructions")])
def instruction(request: Request, who: Who, ctx: Ctx, agent_id: Id, stage: Annotated[InstructionStage, Form()],
                scope: Annotated[InstructionScope, Form()], action: Annotated[Literal["set", "clear", "rollback"], Form()],
                text: Annotated[str, Form(max_length=4000)] = "", version: Annotated[int | None, Form(ge=1)] = None):
    """Set (a new version with ``text``), clear (a new, empty version) or roll back (a new
    version with ``version``'s text) the instruction of a stage and scope type."""
    args = {"agent_id": agent_id, "stage": stage, "scope": scope, "caller": who.principal, "ctx": ctx}
    if action == "set":
        _call(routes_owner.set_instruction, body=_body(o.InstructionText, text=text), **args)
    elif action == "clear":
        _call(routes_owner.clear_instruction, **args)
    else:
        if version is None:
            raise UiError(422, "invalid request", "form version", "a rollback names the version to bring back")
        _call(routes_owner.rollback_instruction, body=_body(o.InstructionRollback, version=version), **args)
    return _done(agent_id, "instruction")


# ------------------------------------------------------------------ pause, resume ---------
@router.post("/pause", dependencies=[Csrf, only_curator("pausing memory")])
def pause(request: Request, who: Who, ctx: Ctx, agent_id: Id, target: Target, session_id: FormId = ""):
    body = _body(o.PauseRequest, target=target, session_id=session_id.strip() or None)
    _call(routes_owner.pause, agent_id=agent_id, body=body, caller=who.principal, ctx=ctx)
    return _done(agent_id, "paused")


@router.post("/resume", dependencies=[Csrf, only_curator("resuming memory")])
def resume(request: Request, who: Who, ctx: Ctx, agent_id: Id, target: Target,
           backfill: Annotated[Literal["no", "yes"], Form()], session_id: FormId = ""):
    """Resuming asks whether to form the messages of the pause: the form has no default, so
    the choice is always the owner's (the HTTP API's default, no backfill, is the seed's)."""
    body = _body(o.ResumeRequest, target=target, session_id=session_id.strip() or None, backfill=backfill == "yes")
    _call(routes_owner.resume, agent_id=agent_id, body=body, caller=who.principal, ctx=ctx)
    return _done(agent_id, "backfilled" if backfill == "yes" else "resumed")
