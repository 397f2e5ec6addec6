"""The MCP server (the official ``mcp`` SDK): memory as tools a model can call (design §12).

Three tools, described for a model:
- ``search_memory(query, categories?, metadata?)``: ``search_facts`` over this user's and the
  agent's facts;
- ``get_memory_context(categories?, metadata?)``: the ``<MemoryContext>`` block the agent gets
  before a reply;
- ``remember(text, metadata?)``: publishes the text as a message from the bound user, through the
  normal chain (ingest, formation, screening), and ends the session so that it forms now.

Agent, user and session come from the connection, never from the arguments: the tools have
no such parameters, and their input schemas refuse unknown ones (``additionalProperties:
false``; a call that passes ``user_id`` is an error, not a silently ignored hint: the SDK
itself would drop it, see ``api.mcp_sdk``). Over stdio
(``memoryctl mcp``) the identity is the process's environment (``api.identity``); over
streamable HTTP (``api.mcp_http``) it is what the request's credential resolved to, put on the
request by the authenticating wrapper before the SDK sees it.

No FastAPI here: the stdio server starts without the HTTP app.
"""

from __future__ import annotations

import uuid
from importlib.metadata import PackageNotFoundError, version
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, WithJsonSchema

from api.identity import Identity
from api.mcp_sdk import closed, quiet_server, refusing_undeclared
from pipeline.errors import PipelineError
from pipeline.owner.categories import MAX_CATEGORIES
from schemas.metadata import FILTER_CATEGORIES_HELP, FILTER_METADATA_SCHEMA, EventMetadata
from schemas.values import TextChars

#: where an authenticating HTTP wrapper leaves the request's identity (the ASGI scope)
SCOPE_KEY = "memory.identity"
SERVER_NAME = "memory"
DISTRIBUTION = "memory-pipeline"
#: what search_memory returns per call (the tool takes no top_k: one page is what a model reads)
SEARCH_TOP_K = 10
QUERY_MAX_CHARS = 500

INSTRUCTIONS = (
    "Long-term memory of this conversation's user and of your own work. Call get_memory_context "
    "at the start of a conversation, search_memory when an answer may have been said before, and "
    "remember when the user asks you to keep something. The memory is always this user's: it is "
    "chosen by the connection, and no tool takes a user or session."
)


#: a note's metadata, as a platform gives a message's (``schemas.metadata``): a label, never an identity
NoteMetadata = Annotated[EventMetadata | None, Field(
    description="What the platform knows of this note, as key/value pairs, e.g. {\"project\": \"apollo\"}; "
                "it labels the note, it never chooses whose memory it goes to")]


class FoundFact(BaseModel):
    content: str
    scope: str = Field(description="'user': about this user; 'agent': your own shared knowledge")
    age: str = Field(description="how long ago it was last changed, e.g. '3d ago'")
    score: float
    categories: list[str] = Field(default_factory=list, description="the categories it is filed under")
    metadata: dict[str, Any] = Field(default_factory=dict, description="metadata of the messages it came from")


# A filter narrows what the connection's identity reaches and never names whose memory it is: a
# category or a metadata value matches labels of facts the connection already reads.
Categories = Annotated[list[str] | None, Field(max_length=MAX_CATEGORIES, description=FILTER_CATEGORIES_HELP)]
Metadata = Annotated[dict[str, Any] | None, WithJsonSchema(FILTER_METADATA_SCHEMA)]


class SearchAnswer(BaseModel):
    facts: list[FoundFact]


class Remembered(BaseModel):
    accepted: bool
    message_id: str
    note: str


IdentityOf = Callable[[Context], Identity]
ServiceFor = Callable[[str], Any]   # agent id -> pipeline.service.MemoryService


def connection_identity(fixed: Identity | None = None) -> IdentityOf:
    """How a tool finds its identity: ``fixed`` (stdio), else the one an authenticating
    wrapper put on the HTTP request's scope. A request without one is refused."""

    def identity_of(ctx: Context) -> Identity:
        if fixed is not None:
            return fixed
        request = ctx.request_context.request
        identity = getattr(request, "scope", {}).get(SCOPE_KEY) if request is not None else None
        if not isinstance(identity, Identity):
            raise ToolError("this connection carries no credential for a user's memory")
        return identity

    return identity_of


def build_server(service_for: ServiceFor, identity_of: IdentityOf) -> MCPServer:
    """The MCP server, its tools bound to ``identity_of`` and reading through ``service_for``."""

    async def search_memory(
        query: Annotated[str, Field(min_length=1, max_length=QUERY_MAX_CHARS,
                                    description="What to look for, in a few words, e.g. 'Maya's email address'"),
                         TextChars],
        ctx: Context, categories: Categories = None, metadata: Metadata = None,
    ) -> SearchAnswer:
        """Search long-term memory for facts about this user and about your own work (names,
        numbers, dates, emails, decisions said in earlier conversations). Returns the best
        matching facts, best first; an empty list means nothing relevant is remembered.
        categories and metadata narrow the search; leave them out to search everything."""
        who = identity_of(ctx)
        found = await _call(service_for(who.agent_id).afind_facts(
            query, session_id=who.session_id, user_id=who.user_id, top_k=SEARCH_TOP_K,
            categories=categories, metadata=metadata))
        return SearchAnswer(facts=[FoundFact(content=h.content, scope=h.scope, age=h.age, score=h.score,
                                             categories=h.categories, metadata=h.metadata) for h in found.hits])

    async def get_memory_context(ctx: Context, categories: Categories = None, metadata: Metadata = None) -> str:
        """Everything remembered that belongs in mind right now, as one <MemoryContext> block:
        what is known about this user, your shared knowledge, this conversation's notes and the
        newest facts. Empty when nothing is remembered yet. categories and metadata narrow the
        facts shown (the summaries stay whole); leave them out to see everything."""
        who = identity_of(ctx)
        xml = await _call(service_for(who.agent_id).aget_memory_context(
            session_id=who.session_id, user_id=who.user_id, categories=categories, metadata=metadata))
        return xml or "<MemoryContext/>"

    async def remember(
        text: Annotated[str, Field(min_length=1, description="What the user asked you to remember, in their words"),
                        TextChars],
        ctx: Context,
        metadata: NoteMetadata = None,
    ) -> Remembered:
        """Keep something the user asked you to remember. It is stored as a message from the user
        and formed into memory shortly after, like anything they say; secrets (passwords, keys,
        card numbers) are never stored."""
        who = identity_of(ctx)
        if not text.strip():
            raise ToolError("text: must not be blank")
        service = service_for(who.agent_id)
        message_id = f"mcp-{uuid.uuid4().hex}"
        await _call(service.amaybe_form_memories(
            [{"message_id": message_id, "role": "user", "sender_id": who.user_id, "content": text,
              **({"metadata": metadata} if metadata else {})}],
            session_id=who.session_id, session_users=[who.user_id]))
        # a note alone would wait for three more messages (§4): ending the session forms it now,
        # and the next message reopens the session (§11)
        await _call(service.aon_session_end(session_id=who.session_id))
        return Remembered(accepted=True, message_id=message_id,
                          note="Queued: it is screened and formed into memory within moments.")

    return _server(search_memory, get_memory_context, remember)


def _server(search_memory, get_memory_context, remember) -> MCPServer:
    """The server of the three tools: annotated for a client (two read, one writes) and
    refusing an argument a tool does not declare."""
    readonly = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    tools = [
        closed(Tool.from_function(search_memory, annotations=readonly)),
        closed(Tool.from_function(get_memory_context, annotations=readonly)),
        closed(Tool.from_function(remember, annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False))),
    ]
    return quiet_server(lambda: MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, tools=tools,
                                          version=package_version(), middleware=[refusing_undeclared(tools)]))


def package_version() -> str:
    """The installed package's version, which ``initialize`` reports as the server's (a
    checkout run without installing it has no metadata: then ``0+unknown``)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


async def _call(awaitable):
    """Await a service call; a refusal the pipeline explains (bad input, a broker that did not
    take the event) reaches the model as its message, anything else stays a server error."""
    try:
        return await awaitable
    except PipelineError as exc:
        raise ToolError(str(exc)) from exc


def service_cache(make: ServiceFor) -> ServiceFor:
    """One service per agent for the life of the server (its store and search caches are
    what make a repeated read cheap)."""
    services: dict[str, Any] = {}

    def service_for(agent_id: str):
        if agent_id not in services:
            services[agent_id] = make(agent_id)
        return services[agent_id]

    return service_for
