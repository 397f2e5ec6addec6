"""The SDK's own Python client, driven from sync tests: one connection, several tool calls.

    results = run_stdio(params, [("search_memory", {"query": "Porto"}), ...])
    results = run_http(url, headers, [...])

Each call's answer is ``(is_error, text, structured)``; ``tools`` lists the advertised tools.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from mcp import ClientSession, StdioServerParameters, stdio_client


@dataclass
class Answer:
    is_error: bool
    text: str
    structured: dict | None

    @property
    def facts(self) -> list[dict]:
        assert not self.is_error, self.text
        return self.structured["facts"]


@dataclass
class Conversation:
    tools: dict[str, dict]          # name -> input schema
    answers: list[Answer]


async def _converse(streams, calls) -> Conversation:
    read, write = streams[0], streams[1]
    async with ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        answers = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            answers.append(Answer(bool(result.is_error), text, result.structured_content))
        return Conversation({t.name: t.input_schema for t in listed.tools}, answers)


def run_stdio(params: StdioServerParameters, calls) -> Conversation:
    async def go():
        async with stdio_client(params) as streams:
            return await _converse(streams, calls)

    return asyncio.run(asyncio.wait_for(go(), 120))


def run_http(url: str, headers: dict[str, str], calls) -> Conversation:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def go():
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                return await _converse(streams, calls)

    return asyncio.run(asyncio.wait_for(go(), 120))


def structured_text(answer: Answer):
    """A tool's text content parsed as JSON (how a model reads a structured answer)."""
    return json.loads(answer.text)
