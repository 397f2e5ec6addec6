"""The ASGI app (design §12 "Interfaces"): ``create_app`` builds it; ``memoryctl serve`` runs
it under uvicorn (``api.serve``), one app per worker process.

    uvicorn --factory api.app:create_app         # what memoryctl serve runs

Versioned paths (``/v1/…``), OpenAPI 3.1 at ``/openapi.json`` (pinned by
``tests/api/openapi.json``), one error shape (``api.errors``), a credential on every route
but ``/healthz`` (``api.auth``), a request size limit, per-credential rate limits in Redis
(``api.limits``), and CORS only for the origins a setting names.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from api import (
    errors, mcp_http, routes_admin, routes_curation, routes_memory, routes_owner, routes_users, routes_webhooks,
    routes_writes,
)
from api.context import AppContext
from api.limits import BodyLimit, RateLimiter, import_limit, rate_limit_redis
from api.tokens import TokenVerifier
from pipeline.service import MemoryService
from schemas import api as m
from schemas.api_settings import ApiSettings, get_api_settings
from schemas.settings import Settings, get_settings

VERSION = "1"


def create_app(
    settings: Settings | None = None, *, service_factory: Callable[[str], MemoryService] | None = None,
    api_settings: ApiSettings | None = None, deps=None, send_job: Callable[[str], None] | None = None,
    start_run: Callable[[str], None] | None = None, rate_limiter: RateLimiter | None = None,
    token_verifier: TokenVerifier | None = None,
) -> FastAPI:
    """The app over the store and queues that ``settings`` name. ``deps`` (store, search,
    embedder, llm, clock; default ``workers.deps.Deps``), ``service_factory`` (agent id ->
    ``MemoryService``; default wired to the worker queues), ``send_job`` and ``start_run``
    (default: the Celery queues) may be given instead (tests, or an app mounted elsewhere)."""
    settings = settings or get_settings()
    api_settings = api_settings or get_api_settings()
    if deps is None:
        from workers.deps import Deps

        deps = Deps(settings)
    if service_factory is None:
        service_factory = _queue_services(settings, deps)
    if send_job is None or start_run is None:
        send_job, start_run = _celery_queues(send_job, start_run)
    ctx = AppContext(
        settings=settings, api_settings=api_settings, deps=deps, service_factory=service_factory,
        token_verifier=token_verifier or TokenVerifier(
            {kid: s.get_secret_value() for kid, s in api_settings.token_secrets.items()},
            max_lifetime_s=api_settings.token_max_lifetime_s, leeway_s=api_settings.token_leeway_s),
        rate_limiter=rate_limiter or RateLimiter(
            rate_limit_redis(api_settings.redis_url, settings.broker_url, api_settings.rate_limit_per_minute),
            api_settings.rate_limit_per_minute),
        send_job=send_job, start_run=start_run,
    )
    app = FastAPI(
        title="Memory pipeline API", version=VERSION, openapi_url="/openapi.json", docs_url="/docs", redoc_url=None,
        lifespan=mcp_http.lifespan,  # runs the /mcp endpoint's session manager
        description="Long-term memory of chat agents: context, search, publishing, users' own memory and "
                    "operations. Every route but /healthz takes `Authorization: Bearer <key or user token>`.",
    )
    app.state.ctx = ctx
    errors.install(app)
    app.include_router(routes_memory.router)
    app.include_router(routes_users.router)
    app.include_router(routes_admin.router)
    app.include_router(routes_webhooks.router)
    app.include_router(routes_owner.router)
    app.include_router(routes_curation.router)
    app.include_router(routes_writes.router)
    mcp_http.mount(app, ctx)  # MCP over streamable HTTP at /mcp, with the same credentials
    from api.ui import mount as mount_inspector  # the web inspector under /ui (docs/inspector.md)
    mount_inspector(app)

    @app.get("/healthz", response_model=m.Health, tags=["health"], summary="Liveness (no credential)")
    def healthz() -> m.Health:
        return m.Health(status="ok")

    if api_settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=api_settings.cors_origins, allow_credentials=False,
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BodyLimit, max_bytes=api_settings.max_body_bytes, streamed_max_bytes=import_limit(api_settings))
    return app


def _celery_queues(
    send_job: Callable[[str], None] | None, start_run: Callable[[str], None] | None,
) -> tuple[Callable[[str], None], Callable[[str], None]]:
    """``send_job`` and ``start_run`` where not given: the Celery queues."""
    from pipeline import names
    from workers.client import start_run as celery_start_run
    from workers.dispatch import send

    return (send_job or (lambda job_id: send(names.TASK_RUN_JOB, {"job_id": job_id})),
            start_run or celery_start_run)


def _queue_services(settings: Settings, deps) -> Callable[[str], MemoryService]:
    """One ``MemoryService`` per agent sharing this process's clients, publishing to the queues."""
    from workers.client import memory_service

    def make(agent_id: str) -> MemoryService:
        return memory_service(agent_id, settings=settings, store=deps.store, search=deps.search,
                              embedder=deps.embedder, clock=deps.clock)

    return make
