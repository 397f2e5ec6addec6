"""Every route says who may call it, on the route itself (``api.permissions``): a route added
without a declared permission fails here, unless it is public for a reason listed below. The
permission is checked before the route reads its body, so a caller it refuses learns nothing of
the body's shape."""

from __future__ import annotations

from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Mount, Route

from api.permissions import MARK
# one app for the module, its store put back as seeded before each test
from tests.api.harness import seeded_api, seeded_module  # noqa: F401  (the `api` fixture)

#: routes any browser or client may call without a credential, and why
PUBLIC = {
    "/healthz": "liveness, for load balancers and orchestrators",
    "/ui/login": "the log-in form, and posting a credential to it",
    "/ui/login/{code}": "a one-time sign-in link: the code is the credential",
    "/ui/logout": "ends whatever session the cookie names (with the form's CSRF token)",
    "/openapi.json": "the API's published description",
    "/docs": "the API's published description, drawn",
    "/docs/oauth2-redirect": "part of the drawn description",
    "/ui/static": "the inspector's vendored scripts and styles",
}
#: not a FastAPI route: its endpoint admits every request itself (``api.mcp_http``, with
#: ``api.auth.admit`` as every door; tests/mcp/test_mcp_http.py refuses it every invalid credential)
ADMITTED_BY_ITS_ENDPOINT = {"/mcp"}


def _declared(dependant) -> list[str]:
    found = [getattr(d.call, MARK) for d in dependant.dependencies if hasattr(d.call, MARK)]
    return found + [p for d in dependant.dependencies for p in _declared(d)]


def test_every_route_declares_who_may_call_it(api):
    undeclared, paths = [], set()
    for route in (found.original_route for found in iter_route_contexts(api.app.routes)):
        paths.add(route.path)
        if isinstance(route, APIRoute):
            if not _declared(route.dependant) and route.path not in PUBLIC:
                undeclared.append(f"{sorted(route.methods)} {route.path}")
        else:
            assert isinstance(route, (Route, Mount)), route
            assert route.path in PUBLIC or route.path in ADMITTED_BY_ITS_ENDPOINT, route.path
    assert undeclared == [], "routes without a declared permission (api.permissions): " + ", ".join(undeclared)
    assert set(PUBLIC) | ADMITTED_BY_ITS_ENDPOINT <= paths, "a public route listed here is gone"


def test_a_refused_caller_learns_nothing_of_the_body_it_would_have_to_send(api, client):
    """An agent key on an admin route, a curator's on a user's edit, a user token ending a
    session: each with a body the route would refuse as invalid. The permission answers first."""
    agent, curator = ({"Authorization": f"Bearer {api.keys[k]}"} for k in ("agent_a", "curator_a"))
    user = {"Authorization": f"Bearer {api.token(user='u1')}"}
    for headers, method, path, body in (
            (agent, "PUT", "/v1/admin/caps", {"caps": "not caps"}),
            (curator, "PATCH", "/v1/agents/A/users/u1/memory/facts/f-u1", {"content": 7}),
            (agent, "PUT", "/v1/agents/A/instructions/extraction/all", {"txt": "x"}),
            (user, "POST", "/v1/agents/A/sessions/s1/start", {"user_ids": "u1"})):
        answer = client.request(method, path, json=body, headers=headers)
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["where"] == "header Authorization" and "body" not in answer.text
