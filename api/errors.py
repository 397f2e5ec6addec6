"""Every error the API answers with has one shape, ``schemas.api.Problem``: what went wrong,
where (the parameter, header or path), and why. Never a traceback, never a 500 for bad input.

The mapping from an exception to what, where and why is made here once, for every door; a
door only presents it: JSON for the API, a page under a prefix that registered its renderer
(``render_pages``: the inspector under ``/ui``). MCP's transport answers its refusals itself,
before FastAPI sees the request (``api.mcp_http.refusal``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipeline.errors import ConfigurationError, Duplicate, InvalidInput, NotStored, StoreFileMissing, TransientError
from schemas.api import Problem

log = logging.getLogger("memory.api")


class ApiError(Exception):
    """An answer other than success, raised anywhere under a route."""

    status = 400

    def __init__(self, what: str, where: str, why: str, *, status: int | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{what} ({where}): {why}")
        self.what, self.where, self.why = what, where, why
        self.status = status or self.status
        self.headers = headers or {}


class Unauthenticated(ApiError):
    """No credential, or one that is not valid (unknown, revoked, expired, badly signed)."""

    status = 401

    def __init__(self, why: str, where: str = "header Authorization") -> None:
        super().__init__("unauthenticated", where, why, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ApiError):
    """A valid credential that does not reach what was asked."""

    status = 403

    def __init__(self, why: str, where: str) -> None:
        super().__init__("forbidden", where, why)


class NotFound(ApiError):
    status = 404

    def __init__(self, why: str, where: str) -> None:
        super().__init__("not found", where, why)


def problem(status: int, what: str, where: str, why: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(Problem(what=what, where=where, why=why).model_dump(), status_code=status, headers=headers)


#: (request, status, what, where, why, headers) -> the response a door presents an error as
PageRenderer = Callable[[Request, int, str, str, str, dict[str, str]], Response]


def render_pages(app: FastAPI, prefix: str, render: PageRenderer) -> None:
    """Present the errors of requests under ``prefix`` with ``render`` (a page) instead of JSON."""
    app.state.error_pages = [*getattr(app.state, "error_pages", []), (prefix.rstrip("/"), render)]


def _sayable(text: str) -> str:
    """``text`` as an answer can carry it: a lone surrogate a caller sent (a JSON ``\\ud800``),
    which no UTF-8 encoder writes, escaped as ``\\ud800``; any other text as it is."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def answer(request: Request, status: int, what: str, where: str, why: str,
           headers: dict[str, str] | None = None) -> Response:
    """An error as the door asked presents it: the page of a registered prefix, else JSON.
    Where and why may quote what the caller sent, a key or a value: they are made sayable
    here, once for every route, so that a refusal of bad input is never a 500 itself."""
    where, why = _sayable(where), _sayable(why)
    path = request.url.path
    for prefix, render in getattr(request.app.state, "error_pages", ()):
        if path == prefix or path.startswith(prefix + "/"):
            return render(request, status, what, where, why, dict(headers or {}))
    return problem(status, what, where, why, headers)


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def where_of(loc: tuple) -> str:
    """``("query", "max_tokens")`` -> ``query max_tokens``; a body path as ``body messages[0].content``."""
    if not loc:
        return "request"
    head, rest = str(loc[0]), loc[1:]
    path = ""
    for part in rest:
        if isinstance(part, str) and (part in _TYPE_TAGS or "-" in part or "[" in part):
            continue  # the member of a union that pydantic tried, not a place in the request
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return f"{head} {path}".strip()


def place(request: Request, field: str) -> str:
    """Where the client sent ``field``, a parameter name a service call names in
    ``InvalidInput`` (``as_of``, ``messages[0].content``): the route's path or query parameter
    of that name (as the client spells it, alias included), else its body."""
    from fastapi.params import Form

    head = field.split(".")[0].split("[")[0]
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is not None:
        for kind, params in (("path", dependant.path_params), ("query", dependant.query_params),
                             ("header", dependant.header_params), ("body", dependant.body_params)):
            for param in params:
                if head in (param.name, param.alias):
                    kind = "form" if isinstance(param.field_info, Form) else kind
                    return f"{kind} {param.alias}{field[len(head):]}"
        if dependant.body_params:
            return f"body {field}"
    return field


def _body_name(request: Request) -> str:
    """How the route's body is named in an error: ``form`` for a form's fields (the
    inspector's), ``body`` for a JSON body."""
    from fastapi.params import Form

    dependant = getattr(request.scope.get("route"), "dependant", None)
    forms = [p for p in (dependant.body_params if dependant else []) if isinstance(p.field_info, Form)]
    return "form" if forms else "body"


def _allowed(request: Request) -> list[str]:
    """The methods some route serves at this path (a path served by several routes, GET and
    PUT, allows all of theirs; Starlette's own header names the first route's only)."""
    from starlette.routing import Match

    return [method for method in _METHODS
            if any(route.matches({**request.scope, "method": method})[0] == Match.FULL
                   for route in request.app.router.routes)]


def _unreadable(exc: Exception) -> str:
    """Why a body that is not JSON could not be read (FastAPI says only "There was an error
    parsing the body")."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        return f"the JSON nests deeper than this server reads (about {sys.getrecursionlimit()} levels)"
    if isinstance(cause, UnicodeDecodeError):
        return f"the body is not UTF-8: {cause.reason} at byte {cause.start}"
    if isinstance(cause, ValueError):  # e.g. a number past Python's digit limit, which the message names
        return f"the body is not JSON that can be read: {str(cause).split(';')[0]}"
    return "the body is not JSON that can be read"


def _invalid_answer(request: Request, exc: RequestValidationError) -> Response:
    """FastAPI's validation error as the one shape: 400 for a body that is not JSON, else 422
    at the first field (as the client spells it), the others counted and placed."""
    # a path parameter that both the route and its declared permission read is one error
    errors = list({(tuple(e.get("loc", ())), e.get("msg")): e for e in exc.errors()}.values())
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        # not JSON at all: the body cannot be read, which is 400, not an invalid value (422)
        position = first.get("loc", ("body", 0))[-1]
        return answer(request, 400, "bad request", "body",
                      f"not valid JSON: {first.get('ctx', {}).get('error', 'decode error')} at character {position}")
    body = _body_name(request)
    wheres = [where_of((body, *loc[1:]) if loc[:1] == ("body",) else loc)
              for loc in (tuple(e.get("loc", ())) for e in errors)] or ["request"]
    others = sorted(set(wheres[1:]) - {wheres[0]})
    why = str(first.get("msg", "invalid")) + (f" (and {len(errors) - 1} more, at {', '.join(others)})" if others
                                               else f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
    return answer(request, 422, "invalid request", wheres[0], why)


def install(app: FastAPI) -> None:
    """Map every error to the one shape (FastAPI's own validation answer included), presented
    by the door the request came through (``answer``)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return _invalid_answer(request, exc)

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> Response:
        return answer(request, exc.status, exc.what, exc.where, exc.why, exc.headers)

    @app.exception_handler(InvalidInput)
    async def _input(request: Request, exc: InvalidInput) -> Response:
        # the same text already stored: a conflict; a named item not stored: not found
        status = 409 if isinstance(exc, Duplicate) else 404 if isinstance(exc, NotStored) else 422
        return answer(request, status, getattr(exc, "what", "invalid request"), place(request, exc.field), exc.reason)

    @app.exception_handler(TransientError)
    async def _transient(request: Request, exc: TransientError) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, type(exc).__name__)
        headers = {"Retry-After": str(int(exc.retry_after or 1))}
        return answer(request, 503, "unavailable", "server", f"{type(exc).__name__}: try again shortly", headers)

    @app.exception_handler(StoreFileMissing)
    async def _store_missing(request: Request, exc: StoreFileMissing) -> Response:
        # the operator's fix is in the message (the path, how to recreate it); nothing is read
        # from the deleted copy meanwhile
        return answer(request, 503, "store missing", "server", str(exc), {"Retry-After": "5"})

    @app.exception_handler(ConfigurationError)
    async def _config(request: Request, exc: ConfigurationError) -> Response:
        return answer(request, 503, "not configured", "server", str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        what = {400: "bad request", 404: "not found", 405: "method not allowed"}.get(exc.status_code, "error")
        where = {404: f"path {request.url.path}", 405: f"path {request.url.path}", 400: "body"}.get(
            exc.status_code, "request")
        headers = dict(getattr(exc, "headers", None) or {})
        why = str(exc.detail)
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed(request))
            why = f"{request.method} is not served here; this path takes {headers['Allow']}"
        elif exc.status_code == 400 and exc.__cause__ is not None:
            why = _unreadable(exc)
        return answer(request, exc.status_code, what, where, why, headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        # a programming error: logged with its traceback here, never sent to the caller
        log.exception("%s %s failed", request.method, request.url.path)
        return answer(request, 500, "internal error", "server", "the error was logged; no detail is sent to callers")
