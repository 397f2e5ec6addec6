"""What an MCP connection acts on (``api.access.connection``): from the credential, with the
runtime's headers for keys; a user token's own values win and contradicting headers are refused."""

from __future__ import annotations

import pytest

from api.access import connection
from api.auth import Principal
from api.errors import ApiError, Forbidden

AGENT = Principal(kind="agent", credential_id="k1", agent_id="A")
ADMIN = Principal(kind="admin", credential_id="k0", agent_id=None)
ALICE = Principal(kind="user", credential_id="t1", agent_id="A", user_id="u1", session_id="s1")


def test_an_agent_key_takes_user_and_session_from_the_runtimes_headers():
    bound = connection(AGENT, {"X-Memory-User": "u7", "X-Memory-Session": "s7"})
    assert (bound.agent_id, bound.user_id, bound.session_id) == ("A", "u7", "s7")
    with pytest.raises(ApiError) as missing:
        connection(AGENT, {})
    assert (missing.value.status, missing.value.where) == (400, "header X-Memory-User")


def test_a_connection_that_names_no_session_gets_the_users_own_mcp_session():
    assert connection(AGENT, {"X-Memory-User": "u7"}).session_id == "mcp:A:u7"
    assert connection(Principal(kind="user", credential_id="t2", agent_id="A", user_id="u1"), {}).session_id == "mcp:A:u1"


def test_an_admin_key_names_the_agent_in_a_header():
    assert connection(ADMIN, {"X-Memory-Agent": "B", "X-Memory-User": "u1"}).agent_id == "B"
    with pytest.raises(Forbidden):
        connection(ADMIN, {})


@pytest.mark.parametrize("headers", [{"X-Memory-User": "u2"}, {"X-Memory-Session": "s2"}])
def test_a_user_token_refuses_headers_that_contradict_it(headers):
    with pytest.raises(Forbidden):
        connection(ALICE, headers)
    bound = connection(ALICE, {})
    assert (bound.agent_id, bound.user_id, bound.session_id) == ("A", "u1", "s1")
