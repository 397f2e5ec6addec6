"""``memoryctl mcp`` over stdio, spawned by the SDK's own client the way an MCP client starts it:
identity from the environment only, tools that refuse any argument naming a user or session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from tests.mcp.client import run_stdio
from testkit.demo_store import AGENT, MAYA, demo_env
from testkit.procs import REPO_ROOT

MEMORYCTL = str(Path(sys.executable).parent / "memoryctl")


def server(store_url: str, **identity: str) -> StdioServerParameters:
    env = demo_env(MEMORY_STORE_URL=store_url, **identity)
    return StdioServerParameters(command=MEMORYCTL, args=["mcp"], env=env, cwd=str(REPO_ROOT))


def as_user(store_url: str, user: str, session: str | None = None) -> StdioServerParameters:
    identity = {"MEMORY_MCP_AGENT": AGENT, "MEMORY_MCP_USER": user}
    if session:
        identity["MEMORY_MCP_SESSION"] = session
    return server(store_url, **identity)


def test_the_tools_take_no_identity_and_their_schemas_refuse_unknown_arguments(demo_store_url):
    talk = run_stdio(as_user(demo_store_url, MAYA), [])
    assert set(talk.tools) == {"search_memory", "get_memory_context", "remember"}
    for name, schema in talk.tools.items():
        assert schema["additionalProperties"] is False, name
        assert not {"user_id", "user", "session_id", "agent_id"} & set(schema.get("properties", {})), name
    assert talk.tools["search_memory"]["required"] == ["query"]
    assert talk.tools["remember"]["required"] == ["text"]


def test_search_and_context_read_the_bound_users_memory(demo_store_url):
    talk = run_stdio(as_user(demo_store_url, MAYA, "s3-maya-followup"), [
        ("search_memory", {"query": "Where does Maya live now?"}),
        ("get_memory_context", {}),
        ("search_memory", {"query": "Maya email address"}),
    ])
    search, context, email = talk.answers
    assert any("maya.chen@lumenlabs.example" in f["content"] for f in email.facts)
    assert any("Porto" in f["content"] and f["scope"] == "user" for f in search.facts)
    assert not context.is_error and context.text.startswith("<MemoryContext")
    assert "Fridays" in context.text and "maya.chen@lumenlabs.example" in context.text


def test_a_user_id_argument_is_refused_and_never_reaches_another_users_memory(demo_store_url):
    talk = run_stdio(as_user(demo_store_url, "user-tom"), [
        ("search_memory", {"query": "Maya email address", "user_id": MAYA}),
        ("get_memory_context", {"user_id": MAYA, "session_id": "s3-maya-followup"}),
        ("remember", {"text": "Maya lives in Porto", "user_id": MAYA}),
        ("search_memory", {"query": "Maya email address"}),
        ("get_memory_context", {}),
        ("search_memory", {"query": "Tom AV engineer streams"}),
    ])
    refused, refused_context, refused_remember, own, own_context, tom = talk.answers
    for answer, field in ((refused, "user_id"), (refused_context, "session_id"), (refused_remember, "user_id")):
        assert answer.is_error and field in answer.text and "Extra inputs are not permitted" in answer.text
    # Tom's own view: his facts and the shared ones, never Maya's user scope
    assert not [f for f in own.facts if "maya.chen" in f["content"] or f["scope"] == "user"]
    assert "Tom Okafor is an AV engineer" in [f["content"] for f in tom.facts if f["scope"] == "user"]
    assert "maya.chen@lumenlabs.example" not in own_context.text and "Fridays" not in own_context.text
    assert "Tom Okafor prefers Slack" in own_context.text


def test_bad_arguments_are_errors_the_model_can_read(demo_store_url):
    talk = run_stdio(as_user(demo_store_url, MAYA), [
        ("search_memory", {"query": ""}),
        ("search_memory", {}),
        ("remember", {"text": "   "}),
    ])
    empty, missing, blank = talk.answers
    assert empty.is_error and "query" in empty.text and "at least 1 character" in empty.text
    assert missing.is_error and "query" in missing.text and "Field required" in missing.text
    assert blank.is_error and "text: must not be blank" in blank.text


@pytest.mark.parametrize(("identity", "message"), [
    ({}, "MEMORY_MCP_AGENT and MEMORY_MCP_USER must be set"),
    ({"MEMORY_MCP_AGENT": AGENT, "MEMORY_MCP_USER": "x" * 129}, "MEMORY_MCP_USER: String should have at most 128"),
])
def test_a_server_started_without_a_valid_identity_says_what_to_set(demo_store_url, identity, message):
    result = subprocess.run([MEMORYCTL, "mcp"], env=demo_env(MEMORY_STORE_URL=demo_store_url, **identity),
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_a_missing_store_is_named_instead_of_served_empty(tmp_path):
    result = subprocess.run([MEMORYCTL, "mcp"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                            env=demo_env(MEMORY_STORE_URL=f"sqlite:///{tmp_path / 'none.db'}",
                                         MEMORY_MCP_AGENT=AGENT, MEMORY_MCP_USER=MAYA))
    assert result.returncode == 2 and f"no store at {tmp_path / 'none.db'}" in result.stderr


def test_over_the_demos_in_process_broker_reads_work_and_remember_is_refused_naming_the_setting(demo_store_url):
    # memory:// lives inside one process: a note published there would reach no worker, so
    # "accepted" would be a lie; the model reads why instead, and the reads still serve
    talk = run_stdio(server(demo_store_url, MEMORY_MCP_AGENT=AGENT, MEMORY_MCP_USER=MAYA,
                            MEMORY_BROKER_URL="memory://localhost/"), [
        ("remember", {"text": "I adopted a cat named Miso"}),
        ("search_memory", {"query": "Where does Maya live now?"}),
    ])
    refused, search = talk.answers
    assert refused.is_error and "MEMORY_BROKER_URL='memory://localhost/' is the in-process broker" in refused.text
    assert any("Porto" in f["content"] for f in search.facts)
