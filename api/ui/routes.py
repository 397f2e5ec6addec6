"""The inspector's log-in and memory pages (design §12): agents, a person's or a session's
memory as the agent sees it, the fact list, a fact's timeline and sources, a source message,
and the user's own edits and deletions (``api.user_memory``, as the HTTP API does them).

Reach is the API's (``api.access``): an admin key sees every agent, an agent key its own
agent's memory, a user token its own memory only.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import RedirectResponse

from api import routes_users, user_memory
from api.access import reach
from api.audit import audited
from api.auth import authenticate
from api.context import AppContext
from api.errors import ApiError
from api.ui import own, views
from api.ui.forms import expiry_change
from api.ui.sessions import (COOKIE, LINK_TTL_S, LOGIN_COOKIE, SESSION_TTL_S, login_csrf_matches,
                             new_login_csrf)
from api.ui.web import (Ctx, UiError, Viewer, any_viewer, check_csrf, check_origin, only_keys, only_user_or_admin,
                        page, parse_as_of, sessions, viewer)
from pipeline.errors import InvalidInput
from schemas.access import subject_digest
from schemas.documents import scope_key
from schemas.values import IdChars
from usecases import lookup

router = APIRouter(prefix="/ui", include_in_schema=False)

Who = Annotated[Viewer, Depends(viewer)]
Id = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f/]+$"), IdChars]
Csrf = Depends(check_csrf)


def _signed_in(request: Request, credential: str) -> RedirectResponse:
    sid, _ = sessions(request).open(credential)
    response = RedirectResponse("/ui/", status_code=303)
    response.set_cookie(COOKIE, sid, max_age=int(SESSION_TTL_S), httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/ui")
    return response


# ------------------------------------------------------------------------ log-in ----------
@router.get("/login")
def login_form(request: Request):
    return _login_page(request)


@router.post("/login")
def login(request: Request, ctx: Ctx, credential: Annotated[str, Form(max_length=4096)] = "",
          csrf: Annotated[str, Form(max_length=128)] = ""):
    """A key or user token typed into the form (a POST body, never a URL). Log-in CSRF (a
    page elsewhere signing the browser in as the attacker) is refused twice: the post must come
    from this site, and carry the token of a log-in form this server handed to this browser."""
    check_origin(request)
    if not login_csrf_matches(request.cookies.get(LOGIN_COOKIE), csrf):
        raise UiError(403, "refused", "form csrf",
                      "the log-in form's CSRF token is missing or stale; reload the log-in page and try again")
    try:
        authenticate(f"Bearer {credential.strip()}", keys=ctx.store, token_verifier=ctx.token_verifier)
    except ApiError as exc:
        return _login_page(request, status=401, refused=exc.why)
    response = _signed_in(request, credential.strip())
    response.delete_cookie(LOGIN_COOKIE, path="/ui/login")
    return response


def _login_page(request: Request, status: int = 200, **values):
    """The log-in form, with a new log-in CSRF token in it and in a strict cookie (no session
    exists yet to hold one: the token is a double submit that only this site's page can make)."""
    token = new_login_csrf()
    response = page(request, "login.html", None, status=status, csrf=token, **values)
    # a form served from the browser's cache would carry a token its cookie no longer holds
    response.headers["Cache-Control"] = "no-store"
    response.set_cookie(LOGIN_COOKIE, token, max_age=int(LINK_TTL_S), httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/ui/login")
    return response


@router.get("/login/{code}")
def login_link(request: Request, code: Annotated[str, Path(max_length=128)]):
    """A one-time link: the code is gone once used, and lapses unused."""
    credential = sessions(request).redeem(code)
    if credential is None:
        return _login_page(request, status=401,
                           refused="this link was used already or has lapsed; ask for a new one (memoryctl ui)")
    return _signed_in(request, credential)


@router.post("/logout", dependencies=[Csrf])
def logout(request: Request):
    sessions(request).close(request.cookies.get(COOKIE))
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


# ------------------------------------------------------------------------ agents ----------
@router.get("/", dependencies=[any_viewer("each sees the agents it reaches")])
def home(request: Request, who: Who, ctx: Ctx):
    p = who.principal
    if p.kind == "user":
        return RedirectResponse(f"/ui/agents/{p.agent_id}/users/{p.user_id}", status_code=303)
    rows = views.agents(ctx.store)
    if p.kind == "agent":
        rows = [r for r in rows if r.agent_id == p.agent_id]
    return page(request, "agents.html", who, agents=rows)


# ------------------------------------------------------------------------ memory ----------
#: what the memory page confirms after an edit or a delete (``?done=``; never the text itself
#: in a URL)
DONE = {"saved": "Saved: the fact below reads as you wrote it (a new version; the old one is in its history).",
        "deleted": "Deleted, with its history."}
OWN_DONE = {"saved": "Saved: it now reads as you wrote it.", "deleted": "Removed: it is forgotten.",
            "withdrawn": "Your part is out: the others keep it, without what came from you."}


@router.get("/agents/{agent_id}/users/{user_id}", dependencies=[any_viewer("api.access.reach decides, by the path")])
def user_page(request: Request, who: Who, ctx: Ctx, agent_id: Id, user_id: Id,
              as_of: Annotated[str | None, Query(max_length=40)] = None,
              done: Annotated[str, Query(max_length=20)] = ""):
    found = reach(who.principal, agent_id, user_id=user_id, user_where="path user_id")
    if who.kind == "user":  # the person themself: their own page, in plain words
        return page(request, "own.html", who, agent_id=agent_id, user_id=found.user_id, done=OWN_DONE.get(done),
                    **own.own_memory(ctx.store, agent_id, found.user_id, ctx.clock.now()))
    return _memory_page(request, ctx, who, agent_id, found.user_id, None, as_of, DONE.get(done))


@router.get("/agents/{agent_id}/sessions/{session_id}",
            dependencies=[any_viewer("api.access.reach decides, by the path")])
def session_page(request: Request, who: Who, ctx: Ctx, agent_id: Id, session_id: Id,
                 as_of: Annotated[str | None, Query(max_length=40)] = None):
    found = reach(who.principal, agent_id, session_id=session_id, sessions=ctx.store)
    return _memory_page(request, ctx, who, agent_id, found.user_id, session_id, as_of)


def _memory_page(request: Request, ctx: AppContext, who: Viewer, agent_id: str, user_id: str | None,
                 session_id: str | None, as_of_text: str | None, done: str | None = None):
    as_of = parse_as_of(as_of_text)
    shown = views.memory(ctx.store, ctx.service(agent_id), agent_id, user_id=user_id, session_id=session_id,
                         as_of=as_of, now=ctx.clock.now())
    mine = user_memory.list_memory(ctx.store, agent_id, user_id, ctx.clock.now()) if user_id and who.kind != "agent" else None
    return page(request, "memory.html", who, agent_id=agent_id, user_id=user_id, session_id=session_id,
                as_of=as_of_text or "", shown=shown, mine=mine, done=done)


@router.get("/agents/{agent_id}/facts", dependencies=[only_keys("the fact list of a scope")])
def fact_list(request: Request, who: Who, ctx: Ctx, agent_id: Id,
              scope: Annotated[str, Query(max_length=300), IdChars] = "agent",
              page_no: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1):
    """One scope key's live facts, a page at a time (an indexed read however many facts the
    agent has; a listing across every scope would sort them all)."""
    reach(who.principal, agent_id)
    key = scope.strip() or "agent"
    if key != "agent" and not key.startswith(("user:", "session:")):
        raise UiError(422, "invalid scope", "query scope", f"expected agent, user:<id> or session:<id>, got {key!r}")
    found = views.fact_page(ctx.store, agent_id, key, page_no, ctx.clock.now())
    return page(request, "facts.html", who, agent_id=agent_id, scope=key, **found)


@router.get("/facts/{fact_id}", dependencies=[any_viewer("a fact is shown to whom it may be (_may_see_fact)")])
def fact_page(request: Request, who: Who, ctx: Ctx, fact_id: Id):
    fact = lookup.fact(ctx.store, fact_id)
    if fact is None or not _may_see_fact(who, fact):
        raise UiError(404, "not found", "path fact_id", "no such fact for this credential")
    return page(request, "fact.html", who, **views.fact_timeline(ctx.store, fact, ctx.clock.now()))


def _may_see_fact(who: Viewer, fact) -> bool:
    p = who.principal
    if p.kind == "admin":
        return True
    if p.agent_id != fact.agent_id:
        return False
    if p.kind == "agent":
        return True
    return fact.scope_key == scope_key("user", user_id=p.user_id) or set(fact.source_user_ids) == {p.user_id}


@router.get("/messages/{session_id}/{message_id}",
            dependencies=[any_viewer("api.access.reach decides, by the session")])
def message_page(request: Request, who: Who, ctx: Ctx, session_id: Id, message_id: Id):
    session = lookup.session(ctx.store, session_id)
    if session is None:
        raise UiError(404, "not found", "path session_id", lookup.NO_SESSION)
    reach(who.principal, session.agent_id, session_id=session_id, sessions=ctx.store)
    found = views.message_window(ctx.store, session_id, message_id)
    if found is None:
        raise UiError(404, "not found", "path message_id", "no such message in this session (erased?)")
    return page(request, "message.html", who, session=session, **found)


# ------------------------------------------------------------------- own edits ------------
@router.post("/agents/{agent_id}/users/{user_id}/facts/{item_id}/edit",
             dependencies=[Csrf, only_user_or_admin("editing memory")])
def edit_fact(request: Request, who: Who, ctx: Ctx, agent_id: Id, user_id: Id, item_id: Id,
              content: Annotated[str, Form(min_length=1, max_length=2000)],
              expires: Annotated[str, Form(max_length=40)] = "", no_expiry: Annotated[bool, Form()] = False):
    p = who.principal
    user = reach(p, agent_id, user_id=user_id, user_where="path user_id").user_id
    change = expiry_change(expires, no_expiry)
    try:
        audited(ctx, p, user_memory.edit_fact(ctx.service(agent_id), agent_id, user, item_id, content,
                                              expires_at=change.get("expires_at"),
                                              clear_expiry="expires_at" in change and change["expires_at"] is None))
    except InvalidInput as exc:  # the rule names the JSON body's field; this form calls it "expires"
        if exc.field != "expires_at":
            raise
        raise UiError(422, "invalid input", "form expires", exc.reason) from None
    return RedirectResponse(f"/ui/agents/{agent_id}/users/{user}?done=saved", status_code=303)


@router.post("/agents/{agent_id}/users/{user_id}/{kind}/{item_id}/delete",
             dependencies=[Csrf, only_user_or_admin("deleting memory")])
def delete_item(request: Request, who: Who, ctx: Ctx, agent_id: Id, user_id: Id, kind: Id, item_id: Id):
    p = who.principal
    kinds = {"facts": "fact", "reflections": "reflection"}
    if kind not in kinds:
        raise UiError(404, "not found", "path kind", "expected facts or reflections")
    user = reach(p, agent_id, user_id=user_id, user_where="path user_id").user_id
    subject = subject_digest(agent_id, user)
    audited(ctx, p, user_memory.delete_item(ctx.deps, agent_id, user, kinds[kind], item_id, holder=f"delete:{subject}"))
    return RedirectResponse(f"/ui/agents/{agent_id}/users/{user}?done=deleted", status_code=303)


@router.post("/agents/{agent_id}/users/{user_id}/{kind}/{item_id}/withdraw",
             dependencies=[Csrf, only_user_or_admin("withdrawing from memory")])
def withdraw_item(request: Request, who: Who, ctx: Ctx, agent_id: Id, user_id: Id, kind: Id, item_id: Id):
    """The HTTP API's withdrawal (``api.routes_users``), its refusal an error page."""
    handlers = {"facts": routes_users.withdraw_fact, "reflections": routes_users.withdraw_reflection}
    if kind not in handlers:
        raise UiError(404, "not found", "path kind", "expected facts or reflections")
    user = reach(who.principal, agent_id, user_id=user_id, user_where="path user_id").user_id
    handlers[kind](agent_id=agent_id, user_id=user, item_id=item_id, caller=who.principal, ctx=ctx)
    return RedirectResponse(f"/ui/agents/{agent_id}/users/{user}?done=withdrawn", status_code=303)
