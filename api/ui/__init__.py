"""The web inspector (design §12, docs/inspector.md): server-rendered pages under ``/ui`` on
the API app, with the API's credentials; ``mount`` adds it to an app."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.errors import render_pages
from api.ui.sessions import LoginSessions
from api.ui.web import HERE, error_page


def mount(app: FastAPI) -> None:
    """Serve the inspector under ``/ui`` (pages) and ``/ui/static`` (vendored assets); an error
    under ``/ui`` reads as a page (``api.errors`` maps it, ``error_page`` draws it)."""
    from api.ui import routes, routes_ops, routes_owner

    app.state.ui_sessions = LoginSessions()
    render_pages(app, "/ui", error_page)
    app.mount("/ui/static", StaticFiles(directory=str(HERE / "static")), name="ui-static")
    app.include_router(routes.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_owner.router)
