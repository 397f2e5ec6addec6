"""What every inspector page shares: the templates, the signed-in viewer (from the session
cookie, authenticated again on every request by ``api.auth.authenticate``), the CSRF check of
mutating forms, and errors rendered as a page (what, where, why), never a traceback.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from api.auth import Principal, authenticate
from api.errors import ApiError, place, where_of
from api.ui.sessions import COOKIE, LoginSessions, UiSession, csrf_matches
from pipeline.errors import InvalidInput, StoreFileMissing
from schemas.values import ID_MAX_CHARS, IdChars, check_instant

log = logging.getLogger("memory.ui")
HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
# value formats of the server-drawn charts
templates.env.globals.update(ms=lambda v: f"{v:.1f} ms", usd=lambda v: f"${v:.4f}", count=lambda v: f"{v:,}")


#: an id typed into a form or a filter: blank (not given) or an id as every door takes it
FormId = Annotated[str, Form(max_length=ID_MAX_CHARS), IdChars]
QueryId = Annotated[str, Query(max_length=ID_MAX_CHARS), IdChars]


class UiError(Exception):
    """A page other than the one asked for: status, what, where, why."""

    def __init__(self, status: int, what: str, where: str, why: str) -> None:
        super().__init__(f"{what} ({where}): {why}")
        self.status, self.what, self.where, self.why = status, what, where, why


class SignIn(Exception):
    """No valid session: the browser is sent to the log-in page."""


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
    """FastAPI dependency: the signed-in viewer, or ``SignIn``."""
    session = sessions(request).get(request.cookies.get(COOKIE))
    if session is None:
        raise SignIn()
    ctx = request.app.state.ctx
    try:
        found = authenticate(f"Bearer {session.credential}", keys=ctx.store, token_verifier=ctx.token_verifier)
    except ApiError:
        sessions(request).close(request.cookies.get(COOKIE))  # revoked key or expired token: the session ends
        raise SignIn() from None
    ctx.rate_limiter.check(found.credential_id)
    request.state.principal = found
    request.state.ui_viewer = Viewer(found, session)  # error pages keep the navigation and sign-out
    return request.state.ui_viewer


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


def _error_page(request: Request, status: int, what: str, where: str, why: str) -> HTMLResponse:
    who = getattr(request.state, "ui_viewer", None)
    return templates.TemplateResponse(request, "error.html", {"who": who, "what": what, "where": where, "why": why},
                                      status_code=status)


class UiRoute(APIRoute):
    """Routes whose errors are pages: a bad parameter, a refused credential or a missing item
    reads as what, where and why; no session sends the browser to the log-in page."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except SignIn:
                return RedirectResponse("/ui/login", status_code=303)
            except UiError as exc:
                return _error_page(request, exc.status, exc.what, exc.where, exc.why)
            except ApiError as exc:
                return _error_page(request, exc.status, exc.what, exc.where, exc.why)
            except InvalidInput as exc:
                return _error_page(request, 422, "invalid input", place(request, exc.field), exc.reason)
            except StoreFileMissing as exc:
                return _error_page(request, 503, "store missing", "server", str(exc))
            except RequestValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {}
                loc = tuple(first.get("loc", ()))
                where = where_of(("form", *loc[1:]) if loc[:1] == ("body",) else loc)  # a page's body is its form
                return _error_page(request, 422, "invalid request", where, first.get("msg", "not valid"))

        return handle


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
