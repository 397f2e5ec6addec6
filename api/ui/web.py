"""What every inspector page shares: the templates, the app's context, the signed-in viewer
(from the session cookie, admitted again on every request by ``api.auth.admit``, as every door's
caller is), the permissions of ``api.permissions`` applied to that viewer, the CSRF check of
mutating forms, and how an error reads as a page (``error_page``, what ``api.errors`` answers
with under ``/ui``): what, where, why, never a traceback; without a session, the log-in page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from api import permissions
from api.auth import Principal, admit
from api.context import AppContext, app_context
from api.errors import ApiError, Unauthenticated
from api.ui.sessions import COOKIE, LoginSessions, UiSession, csrf_matches
from schemas.values import ID_MAX_CHARS, IdChars, check_instant

log = logging.getLogger("memory.ui")
HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
# value formats of the server-drawn charts
templates.env.globals.update(ms=lambda v: f"{v:.1f} ms", usd=lambda v: f"${v:.4f}", count=lambda v: f"{v:,}")


#: an id typed into a form or a filter: blank (not given) or an id as every door takes it
FormId = Annotated[str, Form(max_length=ID_MAX_CHARS), IdChars]
QueryId = Annotated[str, Query(max_length=ID_MAX_CHARS), IdChars]


#: the app's shared context, as every inspector route takes it
Ctx = Annotated[AppContext, Depends(app_context)]


class UiError(ApiError):
    """A page other than the one asked for: status, what, where, why (an ``ApiError``, so the
    one error mapping of ``api.errors`` answers it)."""

    def __init__(self, status: int, what: str, where: str, why: str) -> None:
        super().__init__(what, where, why, status=status)


@dataclass(frozen=True)
class Viewer:
    principal: Principal
    session: UiSession

    @property
    def kind(self) -> str:
        return self.principal.kind

    @property
    def csrf(self) -> str:
        return self.session.csrf


def sessions(request: Request) -> LoginSessions:
    return request.app.state.ui_sessions


def viewer(request: Request) -> Viewer:
    """FastAPI dependency: the signed-in viewer, the session's credential admitted as any
    door's is (``api.auth.admit``). No session, or one whose credential is no longer valid
    (revoked key, expired token: the session ends), raises ``Unauthenticated``, which a page
    answers by sending the browser to the log-in page (``error_page``)."""
    session = sessions(request).get(request.cookies.get(COOKIE))
    if session is None:
        raise Unauthenticated("not signed in", f"cookie {COOKIE}")
    try:
        found = admit(request.app.state.ctx, f"Bearer {session.credential}")
    except Unauthenticated:
        sessions(request).close(request.cookies.get(COOKIE))
        raise
    request.state.principal = found
    request.state.ui_viewer = Viewer(found, session)  # error pages keep the navigation and sign-out
    return request.state.ui_viewer


async def viewer_principal(who: Annotated[Viewer, Depends(viewer)]) -> Principal:
    """The signed-in viewer's principal: what the inspector's declared permissions judge
    (async: a sync dependency costs a hop to the thread pool, for an attribute read)."""
    return who.principal


def only_admin(what: str):
    """A page or form for admin keys only (``api.permissions.admin``, for the viewer)."""
    return permissions.admin(what, principal=viewer_principal)


def only_curator(what: str):
    """An owner's page or form: an admin key, or the path agent's key with ``curate``."""
    return permissions.curator(what, principal=viewer_principal)


def only_user_or_admin(what: str):
    """A change to a user's memory: the user's own token or an admin key, not an agent key."""
    return permissions.not_agent_key(what, principal=viewer_principal)


def only_keys(what: str):
    """A page for agent and admin keys, not a user's token (which sees its own memory page)."""
    return permissions.key(what, principal=viewer_principal)


def any_viewer(what: str):
    """Any signed-in viewer; the page shows each only what it reaches (``what`` says how)."""
    return permissions.any_credential(what, principal=viewer_principal)


async def check_csrf(request: Request) -> None:
    """FastAPI dependency of every POST but the log-in's: the request comes from this site and
    the form's ``csrf`` field is the session's."""
    check_origin(request)
    session = sessions(request).get(request.cookies.get(COOKIE))
    form = await request.form()
    if session is None or not csrf_matches(session, form.get("csrf")):
        raise UiError(403, "refused", "form csrf", "the form's CSRF token is missing or stale; reload the page and try again")


def check_origin(request: Request) -> None:
    """A form posted from another site is refused, whatever it carries: browsers send
    ``Sec-Fetch-Site`` and ``Origin`` on a POST and a page cannot forge either. ``Sec-Fetch-Site``
    decides where it is sent; else a real ``Origin`` must name this host (only the host is
    compared, so a proxy that ends TLS in front, https outside and http here, passes). Under
    the pages' referrer policy (``no-referrer``) a browser sends ``Origin: null`` even from this
    site, so ``null``, like a client that sends neither (not a browser), is judged by the CSRF
    token alone, which every POST needs anyway."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site not in ("same-origin", "none"):
            raise UiError(403, "refused", "header Sec-Fetch-Site",
                          f"a form posted from another site ({site}) is refused; open this page on its own site")
        return
    origin = request.headers.get("origin")
    if origin not in (None, "null") and urlsplit(origin).netloc != request.headers.get("host", request.url.netloc):
        raise UiError(403, "refused", "header Origin",
                      f"a form posted from {origin!r:.80} is refused; open this page on its own site")


def page(request: Request, name: str, who: Viewer | None, status: int = 200, **values) -> HTMLResponse:
    return templates.TemplateResponse(request, name, {"who": who, **values}, status_code=status)


def error_page(request: Request, status: int, what: str, where: str, why: str,
               headers: dict[str, str]) -> Response:
    """How the inspector presents an error that ``api.errors`` mapped: without a valid session
    (401) the log-in page; else a page saying what, where and why, keeping the navigation of
    a signed-in viewer."""
    if status == 401:
        return RedirectResponse("/ui/login", status_code=303)
    who = getattr(request.state, "ui_viewer", None)
    return templates.TemplateResponse(request, "error.html", {"who": who, "what": what, "where": where, "why": why},
                                      status_code=status, headers=headers)


def parse_as_of(text: str | None, where: str = "query as_of") -> datetime | None:
    """A date or time from the form (``datetime-local`` gives no zone: read as UTC), inside
    the span every door takes (``schemas.values``)."""
    if not text or not text.strip():
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UiError(422, "invalid request", where, f"expected a date and time such as 2026-05-01T12:00, got {text!r}") from None
    try:
        return check_instant(when)
    except ValueError as exc:
        raise UiError(422, "invalid request", where, str(exc)) from None
