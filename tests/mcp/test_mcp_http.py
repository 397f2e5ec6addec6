"""MCP over streamable HTTP, mounted in the API app served by a real uvicorn, driven by the SDK's
own client: the credential fixes whose memory is read, whatever the tool arguments or headers say."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.mcp.client import run_http
from testkit.demo_store import AGENT, MAYA

TOM = "user-tom"


def test_a_user_token_reads_its_own_user_and_never_another_whatever_the_arguments(api_server):
    token = api_server.user_token(AGENT, TOM)
    talk = run_http(f"{api_server.url}/mcp", {"Authorization": f"Bearer {token}"}, [
        ("search_memory", {"query": "Maya email address", "user_id": MAYA}),
        ("get_memory_context", {"user_id": MAYA}),
        ("search_memory", {"query": "Maya email address"}),
        ("search_memory", {"query": "Tom AV engineer streams"}),
        ("get_memory_context", {}),
    ])
    assert all(schema["additionalProperties"] is False for schema in talk.tools.values())
    refused, refused_context, maya, tom, context = talk.answers
    assert refused.is_error and refused_context.is_error and "user_id" in refused.text
    assert not [f for f in maya.facts if "maya.chen" in f["content"] or f["scope"] == "user"]
    assert "Tom Okafor is an AV engineer" in [f["content"] for f in tom.facts if f["scope"] == "user"]
    assert "Tom Okafor prefers Slack" in context.text
    assert "maya.chen@lumenlabs.example" not in context.text and "Fridays" not in context.text


def test_an_agent_key_reads_the_user_the_runtime_names_in_the_headers(api_server):
    key = api_server.agent_key(AGENT)
    headers = {"Authorization": f"Bearer {key}", "X-Memory-User": MAYA, "X-Memory-Session": "s3-maya-followup"}
    talk = run_http(f"{api_server.url}/mcp", headers, [
        ("search_memory", {"query": "Where does Maya live now?"}),
        ("get_memory_context", {}),
    ])
    search, context = talk.answers
    assert any("Porto" in f["content"] and f["scope"] == "user" for f in search.facts)
    assert "Fridays" in context.text and "press invitation" in context.text  # user and session memory


def _post(api_server, headers: dict[str, str]) -> tuple[int, dict]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    request = urllib.request.Request(f"{api_server.url}/mcp", data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.parametrize(("who", "extra", "status", "where"), [
    (None, {}, 401, "header Authorization"),
    ("admin", {"X-Memory-User": MAYA}, 403, "header X-Memory-Agent"),
    ("agent", {}, 400, "header X-Memory-User"),
    ("agent", {"X-Memory-User": "\u00e9" * 129}, 422, "header X-Memory-User"),
    ("tom", {"X-Memory-User": MAYA}, 403, "header X-Memory-User"),
    ("tom", {"X-Memory-Session": "s3-maya-followup"}, 403, "header X-Memory-Session"),  # Maya's session
    ("tom-bound", {"X-Memory-Session": "s4-tom-av"}, 403, "header X-Memory-Session"),  # not the token's
    ("other-agent", {"X-Memory-User": MAYA}, None, None),
])
def test_a_connection_without_a_credential_that_reaches_one_user_is_refused_in_the_api_error_shape(
        api_server, who, extra, status, where):
    credential = {
        None: None, "admin": lambda: api_server.agent_key(None, "admin"), "agent": lambda: api_server.agent_key(AGENT),
        "tom": lambda: api_server.user_token(AGENT, TOM), "other-agent": lambda: api_server.agent_key("agent-other"),
        "tom-bound": lambda: api_server.user_token(AGENT, TOM, f"mcp:{AGENT}:{TOM}"),
    }[who]
    headers = {"Authorization": f"Bearer {credential()}"} if credential else {}
    code, answer = _post(api_server, {**headers, **extra})
    if who == "other-agent":
        # another agent's key reaches that agent only: nothing of agent-juniper's users
        assert code == 200 and {t["name"] for t in answer["result"]["tools"]} >= {"search_memory"}
        talk = run_http(f"{api_server.url}/mcp", {**headers, **extra}, [("get_memory_context", {})])
        assert talk.answers[0].text == "<MemoryContext/>"
        return
    error = answer["error"]
    assert code == status and answer["jsonrpc"] == "2.0" and answer["id"] is None, answer
    assert error["data"]["where"] == where and error["data"]["why"] in error["message"], answer


def test_an_admin_key_names_the_agent_and_user_in_headers(api_server):
    headers = {"Authorization": f"Bearer {api_server.agent_key(None, 'admin')}", "X-Memory-Agent": AGENT,
               "X-Memory-User": TOM}
    talk = run_http(f"{api_server.url}/mcp", headers, [("get_memory_context", {})])
    assert "Tom Okafor prefers Slack" in talk.answers[0].text and "Fridays" not in talk.answers[0].text


def test_a_user_token_may_name_one_of_its_own_sessions(api_server):
    headers = {"Authorization": f"Bearer {api_server.user_token(AGENT, MAYA)}", "X-Memory-Session": "s3-maya-followup"}
    talk = run_http(f"{api_server.url}/mcp", headers, [("get_memory_context", {})])
    assert "press invitation" in talk.answers[0].text  # that session's memory


@pytest.mark.parametrize(("who", "extra", "reason"), [
    ("wrong key", {}, "unknown key"),
    ("agent", {}, "missing header (header X-Memory-User)"),
    ("tom", {"X-Memory-Session": f"mcp:{AGENT}:{MAYA}"}, "another user's own MCP session"),
    ("tom", {"X-Memory-Session": "s3-maya-followup"}, "not one of this user's"),
])
def test_the_official_client_shows_the_caller_why_the_server_refused(api_server, who, extra, reason):
    from mcp import MCPError

    credential = {"wrong key": "mk_0000000000000000_" + "x" * 43, "agent": api_server.agent_key(AGENT),
                  "tom": api_server.user_token(AGENT, TOM)}[who]
    messages = []
    try:
        run_http(f"{api_server.url}/mcp", {"Authorization": f"Bearer {credential}", **extra}, [])
    except* MCPError as refused:  # the SDK's task group hands it on inside an exception group
        messages = [str(e) for e in _leaves(refused)]
    assert messages and all(reason in m for m in messages), messages


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [leaf for e in group.exceptions for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]


def test_a_missing_or_wrong_credential_gets_401_with_www_authenticate(api_server):
    for headers, challenge in (({}, 'Bearer realm="memory", error_description='),
                               ({"Authorization": "Bearer mk_0000000000000000_" + "x" * 43},
                                'Bearer realm="memory", error="invalid_token"')):
        request = urllib.request.Request(f"{api_server.url}/mcp", data=b"{}", method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"].startswith(challenge)
        assert refused.value.headers["Content-Type"] == "application/json"


def test_initialize_reports_the_packages_version(api_server):
    from importlib.metadata import version

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def server_info():
        headers = {"Authorization": f"Bearer {api_server.user_token(AGENT, TOM)}"}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(f"{api_server.url}/mcp", http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    return (await session.initialize()).server_info

    import asyncio

    info = asyncio.run(asyncio.wait_for(server_info(), 60))
    assert info.name == "memory" and info.version == version("memory-pipeline")
