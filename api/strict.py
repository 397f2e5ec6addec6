"""Unknown query parameters are refused (422, naming them) instead of ignored: a caller who
writes ``?user=u1`` for ``?user_id=u1`` would otherwise get an answer for nobody and never
know why."""

from __future__ import annotations

from fastapi import Request

from api.errors import ApiError


def known_query_only(request: Request) -> None:
    """Router dependency: every query parameter is one the route declares."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = {p.alias for p in _query_params(dependant)}
    unknown = sorted({key for key in request.query_params.keys() if key not in known})
    if unknown:
        raise ApiError("invalid request", f"query {unknown[0]}" if unknown[0] else "query",
                       f"unknown query parameter(s) {unknown}; this route takes {sorted(known) or 'none'}", status=422)


def _query_params(dependant):
    yield from dependant.query_params
    for sub in dependant.dependencies:
        yield from _query_params(sub)
