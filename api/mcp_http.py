"""The MCP server over streamable HTTP, mounted in the API app at ``/mcp`` (design §12).

Every request is authenticated like any API request (``api.auth``: the same keys and tokens,
the same rate limit), and its identity is fixed before the SDK sees it, by the API's own reach
rule (``api.access.connection``):
- a user-bound token: its agent and user, and its session if it names one (else a session the
  runtime names in ``X-Memory-Session`` that is one of the user's, else the user's own MCP
  session ``mcp:<user>``); ``X-Memory-User`` naming anyone else is refused (403);
- an agent key: its agent, and the user and session the runtime's code names in the
  ``X-Memory-User`` (required) and ``X-Memory-Session`` headers;
- an admin key: the agent named in ``X-Memory-Agent``, then as an agent key.

The SDK runs stateless with JSON answers: each POST stands alone, so any uvicorn worker can
serve any request (a stateful session would live in one worker only). DNS-rebinding checks are
off because every request must carry a credential and CORS is off unless configured.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import Headers

from api.access import connection
from api.auth import SESSION_HEADER, USER_HEADER, Principal, authenticate
from api.errors import ApiError, problem
from api.identity import Identity, default_session
from api.mcp import SCOPE_KEY, build_server, connection_identity
from schemas.events import Id

PATH = "/mcp"
_ID = TypeAdapter(Id)


def identity_for(p: Principal, headers: Headers, sessions=None) -> Identity:
    """Whose memory this request reaches, decided where every route's reach is decided
    (``api.access.connection``); a connection without a session gets the user's own MCP session.
    Raises ``ApiError``."""
    found = connection(p, headers, sessions=sessions)
    if not found.user_id:
        raise ApiError("missing header", f"header {USER_HEADER}",
                       "a key's MCP connection names its user here (set by the runtime, not the model)")
    user = _check(found.user_id, USER_HEADER)
    session = _check(found.session_id, SESSION_HEADER) if found.session_id else default_session(user)
    return Identity(found.agent_id, user, session)


def _check(value: str, header: str) -> str:
    try:
        return _ID.validate_python(value)
    except ValidationError as exc:
        raise ApiError("invalid request", f"header {header}", exc.errors()[0]["msg"], status=422) from None


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
            await problem(exc.status, exc.what, exc.where, exc.why, exc.headers)(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)

    def _identity(self, headers: Headers) -> Identity:
        found = authenticate(headers.get("authorization"), keys=self._ctx.store,
                             token_verifier=self._ctx.token_verifier)
        self._ctx.rate_limiter.check(found.credential_id)
        return identity_for(found, headers, sessions=self._ctx.store)


def mount(app, ctx) -> None:
    """Serve MCP at ``/mcp`` of ``app`` (the API's FastAPI app), reading through ``ctx``'s
    services; the SDK's session manager runs inside the app's lifespan."""
    server = build_server(ctx.service, connection_identity())
    endpoint = _Authenticated(ctx)
    app.add_route(PATH, endpoint, include_in_schema=False)
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application):
        server.streamable_http_app(
            stateless_http=True, json_response=True, max_request_body_size=ctx.api_settings.max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        endpoint.manager = server.session_manager
        try:
            async with endpoint.manager.run():
                async with outer(application) as state:
                    yield state
        finally:
            endpoint.manager = None

    app.router.lifespan_context = lifespan
