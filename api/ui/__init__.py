"""The web inspector (design §12, docs/inspector.md): server-rendered pages under ``/ui`` on
the API app, with the API's credentials; ``mount`` adds it to an app."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.ui.sessions import LoginSessions
from api.ui.web import HERE


def mount(app: FastAPI) -> None:
    """Serve the inspector under ``/ui`` (pages) and ``/ui/static`` (vendored assets)."""
    from api.ui import routes, routes_ops, routes_owner

    app.state.ui_sessions = LoginSessions()
    app.mount("/ui/static", StaticFiles(directory=str(HERE / "static")), name="ui-static")
    app.include_router(routes.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_owner.router)
