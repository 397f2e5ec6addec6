"""The MCP server over streamable HTTP, mounted in the API app at ``/mcp`` (design §12).

Every request is admitted like any API request (``api.auth.admit``: the same keys and tokens,
the same rate limit), and its identity is fixed before the SDK sees it, by the API's own reach
rule (``api.access.connection``):
- a user-bound token: its agent and user, and its session if it names one (else a session the
  runtime names in ``X-Memory-Session`` that is one of the user's, else the user's own MCP
  session ``mcp:<agent>:<user>``); ``X-Memory-User`` naming anyone else is refused (403);
- an agent key: its agent, and the user and session the runtime's code names in the
  ``X-Memory-User`` (required) and ``X-Memory-Session`` headers;
- an admin key: the agent named in ``X-Memory-Agent``, then as an agent key;
and whoever asks, the session passes the one session rule (``api.membership``). A refusal is
answered as the MCP clients read it (``refusal``).

The SDK runs stateless with JSON answers: each POST stands alone, so any uvicorn worker can
serve any request (a stateful session would live in one worker only). DNS-rebinding checks are
off because every request must carry a credential and CORS is off unless configured.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import anyio
from fastapi.responses import JSONResponse
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers

from api.access import connection
from api.auth import Principal, admit
from api.errors import ApiError
from api.identity import Identity
from api.mcp import SCOPE_KEY, build_server, connection_identity

PATH = "/mcp"


def identity_for(p: Principal, headers: Headers, sessions=None) -> Identity:
    """Whose memory this request reaches, decided where every route's reach is decided
    (``api.access.connection``, with the one session rule of ``api.membership``). Raises
    ``ApiError``."""
    found = connection(p, headers, sessions=sessions)
    return Identity(found.agent_id, found.user_id, found.session_id)


class _Authenticated:
    """ASGI: authenticate, rate-limit and bind the identity, then hand to the SDK's manager of
    the running lifespan (a new one per lifespan: the SDK runs a manager only once)."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx
        self.manager = None

    async def __call__(self, scope, receive, send) -> None:
        headers = Headers(scope=scope)
        try:
            # the key lookup, the rate limit and the session check are store and Redis round
            # trips: in a worker thread, so that the event loop keeps serving other requests
            scope[SCOPE_KEY] = await anyio.to_thread.run_sync(self._identity, headers)
            if self.manager is None:
                raise ApiError("unavailable", "server", "the MCP endpoint is not running (the app's lifespan has "
                               "not started)", status=503)
        except ApiError as exc:
            await refusal(exc)(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)

    def _identity(self, headers: Headers) -> Identity:
        found = admit(self._ctx, headers.get("authorization"))
        return identity_for(found, headers, sessions=self._ctx.store)


#: the JSON-RPC error code of a refusal by HTTP status (-32000 to -32099: server-defined errors)
_CODES = {400: -32600, 422: -32602, 401: -32001, 403: -32003, 429: -32029}


def refusal(exc: ApiError) -> JSONResponse:
    """A transport-level refusal as the MCP clients read it: the HTTP status (401 with
    ``WWW-Authenticate`` for a missing or wrong credential, per the MCP authorization spec and
    RFC 6750), and a JSON-RPC error object as the body, ``id`` null (the request was refused
    before it was read), its message the reason and its data the API's what/where/why. The
    official SDK clients surface such a body's error; any other body becomes a generic
    "Server returned an error response" (``mcp/client/streamable_http.py``)."""
    message = f"{exc.what} ({exc.where}): {exc.why}"
    headers = dict(exc.headers)
    if exc.status == 401:
        # RFC 6750 §3: a request without a credential gets no error code, a refused one invalid_token
        code = "" if exc.why.startswith(("no credential", "expected Authorization")) else ', error="invalid_token"'
        description = exc.why.encode("ascii", "replace").decode().replace('"', "'").replace("\\", "/")
        headers["WWW-Authenticate"] = f'Bearer realm="memory"{code}, error_description="{description}"'
    body = {"jsonrpc": "2.0", "id": None, "error": {
        "code": _CODES.get(exc.status, -32000), "message": message,
        "data": {"what": exc.what, "where": exc.where, "why": exc.why}}}
    return JSONResponse(body, status_code=exc.status, headers=headers)


def mount(app, ctx) -> None:
    """Serve MCP at ``/mcp`` of ``app`` (the API's FastAPI app), reading through ``ctx``'s
    services. The SDK's session manager runs in the app's lifespan, which must be ``lifespan``
    (given to ``FastAPI(lifespan=...)``: the wiring the SDK documents for FastAPI)."""
    server = build_server(ctx.service, connection_identity())
    endpoint = _Authenticated(ctx)
    app.add_route(PATH, endpoint, include_in_schema=False)

    @asynccontextmanager
    async def running():
        server.streamable_http_app(
            stateless_http=True, json_response=True, max_request_body_size=ctx.api_settings.max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        endpoint.manager = server.session_manager
        try:
            async with endpoint.manager.run():
                yield
        finally:
            endpoint.manager = None

    app.state.mcp_running = running


@asynccontextmanager
async def lifespan(app):
    """The app's lifespan: the mounted MCP endpoint's session manager runs as long as the app
    (a new manager each time: the SDK runs one only once)."""
    running = getattr(app.state, "mcp_running", None)
    if running is None:  # an app without MCP
        yield
        return
    async with running():
        yield
