"""Who may call a route, declared on the route (design §12), the way FastAPI's own
``dependencies=[Depends(...)]`` declares a superuser-only route: ``admin("listing runs")`` in
the route's ``dependencies`` refuses every other credential before the handler runs, and before
the body is read into the route's models (a refused caller learns nothing of its shape).

Each factory takes the door's principal dependency: ``api.auth.caller`` (the bearer header)
by default, the inspector's signed-in viewer for ``/ui``. The rules themselves are
``api.access``'s; what a credential reaches within a route it may call (which user, which
session) stays ``api.access.reach``'s, asked in the handler with the ids the request names.
``tests/api/test_route_permissions.py`` fails for a route that declares none.
"""

# no ``from __future__ import annotations``: FastAPI reads the checks' annotations at run time,
# and they name the door's principal dependency, a local of the factory
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Path
from fastapi.params import Depends as DependsParam

from api.access import require_admin, require_agent, require_curator, require_key, require_not_agent_key
from api.auth import Principal, caller
from schemas.values import Id

AgentPath = Annotated[Id, Path()]
#: the attribute that marks a dependency as a route's declared permission
MARK = "permission"


def _declared(check: Callable, rule: str, what: str) -> DependsParam:
    setattr(check, MARK, f"{rule}: {what}")
    return Depends(check)


def _for_caller(rule: Callable[[Principal, str], None], what: str, principal: Callable) -> DependsParam:
    async def check(p: Annotated[Principal, Depends(principal)]) -> None:
        rule(p, what)

    return _declared(check, rule.__name__, what)


def _for_agent(rule: Callable[[Principal, str, str], None], what: str, principal: Callable) -> DependsParam:
    """A rule over the path's ``agent_id`` (validated first: an id the route refuses is a 422)."""

    async def check(agent_id: AgentPath, p: Annotated[Principal, Depends(principal)]) -> None:
        rule(p, agent_id, what)

    return _declared(check, rule.__name__, what)


def admin(what: str, *, principal: Callable = caller) -> DependsParam:
    """An admin key only (operators' routes and pages)."""
    return _for_caller(require_admin, what, principal)


def curator(what: str, *, principal: Callable = caller) -> DependsParam:
    """An owner's controls of the path's agent: an admin key, or that agent's key with ``curate``."""
    return _for_agent(require_curator, what, principal)


def not_agent_key(what: str, *, principal: Callable = caller) -> DependsParam:
    """Changes to a user's memory, exports, erasure: the user's own token or an admin key."""
    return _for_caller(require_not_agent_key, what, principal)


def key(what: str, *, principal: Callable = caller) -> DependsParam:
    """Session lifecycle: an agent or admin key, not an end user's token."""
    return _for_caller(require_key, what, principal)


def of_agent(what: str, *, principal: Callable = caller) -> DependsParam:
    """Any credential of the path's agent (an admin key reaches every agent); the user and
    session it reaches there are ``api.access.reach``'s to decide, in the handler."""
    return _for_agent(require_agent, what, principal)


def _anyone(p: Principal, what: str) -> None:
    """Every valid credential: what it sees is filtered by ``api.access`` in the handler."""


def any_credential(what: str, *, principal: Callable = caller) -> DependsParam:
    """Any valid credential; the route shows each only what it reaches (``what`` says how)."""
    return _for_caller(_anyone, what, principal)
