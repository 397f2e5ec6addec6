"""The ``MemoryService`` facade (design §6): what an agent runtime calls.

    from workers.client import memory_service

    service = memory_service("agent-1")   # wired to the worker queues (Celery lives there)
    xml = service.get_memory_context(session_id="session-9", user_id="alice")  # into the prompt
    hits = service.search_facts("Alice's email", session_id="session-9", user_id="alice")
    service.maybe_form_memories([{"message_id": "m1", "role": "user", "sender_id": "alice",
                                  "content": "..."}], session_id="session-9")

``session_id`` and ``user_id`` are keyword-only in every method: both are plain strings, so a
positional swap would silently read another scope and answer "" or [].

Every method is synchronous and thread-safe; each has an ``a``-prefixed coroutine twin
(``await service.aget_memory_context(...)``) that runs it in a worker thread
(``asyncio.to_thread``), so an event loop is never blocked by the store.

Clients (store, search, embedder, clock) are built lazily from settings, or injected (tests,
or a runtime that already holds them). The publisher of events and the starter of claimed runs
are always injected: ``pipeline`` imports nothing of ``workers``, and
``workers.client.memory_service`` builds a service wired to the Celery queues. A service
built with ``MemoryService(agent_id)`` alone reads memory (context, search, stats) and says
so clearly if asked to publish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from contextlib import contextmanager
from functools import cached_property
from typing import Any

from pydantic import TypeAdapter, ValidationError

from pipeline import context, own_session, retrieval, stats, tracing
from pipeline.clock import Clock
from pipeline.context_assembly import ContextAssembly
from pipeline.errors import ConfigurationError, InvalidInput
from pipeline.publisher import Publisher
from pipeline.search.filters import MemoryFilter, check_filter
from pipeline.search.hits import Found
from pipeline.search.query import FactQuery, SearchClients
from schemas.hits import SearchHit
from pipeline.store.port import Store
from pipeline.sweep import start_runs
from pipeline.validity import check_as_of
from pipeline.trigger import cold_rule, new_run
from pipeline.visibility import read_visibility
from schemas import events
from schemas.context import ContextBlock
from schemas.events import MESSAGE_FIELDS, Id, Rejection, parse_event
from schemas.settings import Settings, get_settings

_ID = TypeAdapter(Id)
_NOT_WIRED = (
    "this MemoryService has no {what}: build it with workers.client.memory_service(agent_id), which "
    "wires the worker queues, or pass {arg}=... (a service built with MemoryService(...) alone only reads)"
)


class MemoryService:
    """Memory of one agent: read its context, search its facts, hand it conversation events."""

    def __init__(
        self, agent_id: str, *, settings: Settings | None = None, store: Store | None = None,
        search=None, embedder=None, publisher: Publisher | None = None, clock: Clock | None = None,
        run_starter: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise InvalidInput("agent_id", "must be a non-empty string")
        self.agent_id = agent_id
        self.settings = settings or get_settings()
        self.clock = clock or Clock()
        self._given = {"store": store, "search": search, "embedder": embedder, "publisher": publisher}
        self._given_run_starter = run_starter

    # ----------------------------------------------------------------- clients -------------
    @cached_property
    def store(self) -> Store:
        if self._given["store"] is not None:
            return self._given["store"]
        from pipeline.store import open_store

        return open_store(self.settings)

    @cached_property
    def search(self):
        if self._given["search"] is not None:
            return self._given["search"]
        from pipeline.search import open_search

        return open_search(self.store, self.settings)

    @cached_property
    def embedder(self):
        if self._given["embedder"] is not None:
            return self._given["embedder"]
        from pipeline.embeddings import open_embedder

        return open_embedder(self.settings)

    @property
    def publisher(self) -> Publisher:
        """Where conversation events go. The facade knows no queue: the agent runtime builds
        the service with ``workers.client.memory_service``, which gives it the Celery one."""
        if self._given["publisher"] is None:
            raise ConfigurationError(_NOT_WIRED.format(what="publisher", arg="publisher"))
        return self._given["publisher"]

    @property
    def _run_starter(self) -> Callable[[str], None]:
        if self._given_run_starter is None:
            raise ConfigurationError(_NOT_WIRED.format(what="run starter", arg="run_starter"))
        return self._given_run_starter

    @cached_property
    def _assembly(self) -> ContextAssembly:
        return ContextAssembly(self.store, self.settings, self.agent_id)

    # ----------------------------------------------------------------- visibility ----------
    def _view(self, session_id: str, user_id: str | None) -> context.Visibility:
        """Who may see what here (``pipeline.visibility``), read once per call."""
        return read_visibility(self.store, self.settings, self.agent_id, session_id=session_id, user_id=user_id)

    # ----------------------------------------------------------------- context -------------
    def get_memory_context(
        self, *, session_id: str, user_id: str | None, force_refresh: bool = False, max_tokens: int | None = None,
        as_of: datetime | None = None, query: str | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """The ``<MemoryContext>`` XML for this session and user ("" when nothing shows),
        within ``max_tokens`` estimated tokens (None: ``MEMORY_CONTEXT_MAX_TOKENS``, by default
        derived from the design's limits so that every blob at its word limit fits); see
        ``pipeline.packing`` for what goes first and how what is left out is stated.

        ``query`` (the current message, or what the agent is about to answer) adds
        ``<RelevantFacts>``: the best ``MEMORY_CONTEXT_RELEVANT_FACTS`` facts ``search_facts``
        finds for it, packed after the blobs and reflections and before the recent facts, so
        an older fact that answers the message is in the prompt without a tool call. ``<Facts>`` then lists
        only the recent facts not already shown. Such a context depends on the message and
        is never cached (no access is recorded for it either).

        Served from the session's cache while it is younger than the TTL, no version stamp
        of a scope it shows has moved and it was built for the same budget; otherwise (or
        with ``force_refresh``) rebuilt and cached again.

        ``as_of`` (a timezone-aware time; default now) shows memory as it stood then
        (``pipeline.validity``): the facts valid then, aged at ``as_of``, a blob only if it
        was consolidated by then, the reflections buffered then. Such a context is never
        cached.

        ``categories`` and ``metadata`` narrow the facts shown (``<Facts>``, ``<RelevantFacts>``)
        to those filed under any of the categories and holding, per key, one of the values
        given (``pipeline.search.filters``); blobs and reflections, which carry neither, are
        shown as they are. Such a context is never cached.
        """
        where = self._where(categories, metadata)
        with self._context_call(session_id, user_id, force_refresh, as_of, query) as as_of:
            xml = context.render_xml(
                self._memory_context(session_id, user_id, force_refresh, max_tokens, as_of, query, where))
            tracing.set_attributes({"memory.context_chars": len(xml)})
            return xml

    def memory_context(
        self, *, session_id: str, user_id: str | None, force_refresh: bool = False, max_tokens: int | None = None,
        as_of: datetime | None = None, query: str | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ContextBlock:
        """``get_memory_context`` as the model it renders: the sections, relevant and recent
        facts and omissions the XML shows, for a door that shows the same memory as data."""
        where = self._where(categories, metadata)
        with self._context_call(session_id, user_id, force_refresh, as_of, query) as as_of:
            return self._memory_context(session_id, user_id, force_refresh, max_tokens, as_of, query, where)

    def _where(self, categories: Sequence[str] | None, metadata: Mapping[str, Any] | None) -> MemoryFilter | None:
        """The filter of a call, checked against the agent's categories and filterable keys
        (``InvalidInput`` naming the bad part); None when the call names none (or empty ones)."""
        if not categories and not metadata:
            return None
        return check_filter(self.store.ingest.get_agent_settings(self.agent_id), categories, metadata)

    @contextmanager
    def _context_call(
        self, session_id: str, user_id: str | None, force_refresh: bool, as_of: datetime | None, query: str | None,
    ) -> Iterator[datetime | None]:
        """The arguments of a context call checked (``as_of`` given back, checked), and its span."""
        _require("session_id", session_id)
        _id("user_id", user_id)
        as_of = check_as_of(as_of)
        if query is not None and (not isinstance(query, str) or not query.strip()):
            raise InvalidInput("query", f"expected the current message as a non-blank string, got {query!r}")
        with tracing.span("get_memory_context", {"memory.agent_id": self.agent_id, "memory.session_id": session_id,
                                                 "memory.user_id": user_id, "memory.force_refresh": force_refresh,
                                                 "memory.as_of": as_of.isoformat() if as_of else None,
                                                 "memory.query": query is not None}):
            yield as_of

    def _memory_context(
        self, session_id: str, user_id: str | None, force_refresh: bool, max_tokens: int | None,
        as_of: datetime | None, query: str | None, where: MemoryFilter | None = None,
    ) -> ContextBlock:
        budget = self._assembly.budget(max_tokens)
        view = self._view(session_id, user_id)
        if not view.context_scope_keys:
            return ContextBlock()  # master toggle off
        if as_of is None and query is None and where is None:
            return self._assembly.cached(view, session_id=session_id, user_id=user_id, now=self.clock.now(),
                                         budget=budget, force_refresh=force_refresh)
        relevant = self._relevant(view, session_id, user_id, query, as_of, where) if query is not None else []
        return self._assembly.build(view, as_of or self.clock.now(), budget, as_of=as_of, relevant=relevant,
                                    where=where)

    def _relevant(
        self, view: context.Visibility, session_id: str, user_id: str | None, query: str, as_of: datetime | None,
        where: MemoryFilter | None,
    ) -> list[SearchHit]:
        """What ``search_facts`` finds for ``query`` here, best first, in the view already read."""
        if not self.settings.context_relevant_facts:
            return []
        return self._search(query, session_id, user_id, top_k=self.settings.context_relevant_facts, as_of=as_of,
                            view=view, track_access=False, where=where).hits

    def _search(self, query: str | Sequence[str], session_id: str, user_id: str | None, **options: Any) -> Found:
        """``pipeline.retrieval.search_facts`` with this service's clients."""
        clients = SearchClients(self.store, self.search, self.embedder, self.settings, self.clock)
        return retrieval.search_facts(clients, FactQuery(self.agent_id, session_id, user_id, query, **options))

    # ----------------------------------------------------------------- search --------------
    def search_facts(
        self, query: str | Sequence[str], *, session_id: str, user_id: str | None, top_k: int = 10,
        debug: bool = False, as_of: datetime | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The ``search_facts`` tool: ``[{id, content, scope, formed_at, updated_at, age,
        score}]`` best first, or ``{"results": [...], "debug": {...}}`` with ``debug``. Empty
        when the tool is not offered here (rag off, or both memory toggles off). ``as_of`` (a
        timezone-aware time; default now) searches the facts as they were valid then.
        ``categories`` (any of) and ``metadata`` (per key, any of its values) narrow the facts
        searched (``pipeline.search.filters``)."""
        return self.find_facts(query, session_id=session_id, user_id=user_id, top_k=top_k, debug=debug,
                               as_of=as_of, categories=categories, metadata=metadata).documented()

    def find_facts(
        self, query: str | Sequence[str], *, session_id: str, user_id: str | None, top_k: int = 10,
        debug: bool = False, as_of: datetime | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Found:
        """``search_facts`` typed: the hits as ``SearchHit`` models, for a door that answers
        with them as they are (the HTTP API's ``SearchResponse``, MCP)."""
        _require("session_id", session_id)
        _id("user_id", user_id)
        where = self._where(categories, metadata)
        queries = 1 if isinstance(query, str) else len(query) if isinstance(query, (list, tuple)) else None
        with tracing.span("search_facts", {"memory.agent_id": self.agent_id, "memory.session_id": session_id,
                                           "memory.user_id": user_id, "memory.queries": queries, "memory.top_k": top_k,
                                           "memory.filtered": where is not None}):
            return self._search(query, session_id, user_id, top_k=top_k, debug=debug, as_of=as_of, where=where)

    def tool_definition(self, *, session_id: str, user_id: str | None) -> dict[str, Any] | None:
        """The JSON-schema tool to offer in this conversation, or None when it is not offered."""
        return retrieval.tool_definition() if self._view(session_id, user_id).search_offered else None

    # ----------------------------------------------------------------- events --------------
    def maybe_form_memories(
        self, messages: Sequence[Mapping[str, Any]], *, session_id: str,
        session_users: Sequence[str] | None = None, user_tier: int = 0, preview: bool = False,
        agent_name: str | None = None,
    ) -> int:
        """Publish the conversation's new messages; the ingest workers decide whether a
        formation is due (§4), so this never waits for one. Each message is a dict with
        ``message_id``, ``role``, ``content``, ``sender_id`` (for user messages),
        optionally ``sender_name``, ``created_at`` and ``metadata`` (what the platform knows
        of it: ``schemas.metadata``; facts keep the keys the owner marks filterable). Event ids derive from the message ids,
        so publishing the same message twice is harmless. Every message is validated first:
        one bad message rejects the call before anything is published. Returns how many
        events were published."""
        _require("session_id", session_id)
        users = list(session_users or ())  # the store merges them with the declared humans
        now = self.clock.now()
        built = [
            self._message_event(session_id, i, m, now, session_users=users, user_tier=user_tier, preview=preview,
                                agent_name=agent_name)
            for i, m in enumerate(messages)
        ]
        if not built:
            return 0
        own_session.refuse_strangers(self.agent_id, session_id, [*users, *_senders(built)], "session_users")
        self.publisher.publish(built)
        return len(built)

    def _message_event(
        self, session_id: str, index: int, message: Mapping[str, Any], now: datetime, **fields: Any,
    ) -> dict[str, Any]:
        """``message`` as a validated ``message.added`` event (``schemas.events.message_added``),
        its id derived from the message id; ``InvalidInput`` names ``messages[index]``."""
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise InvalidInput(where, f"expected a dict, got {type(message).__name__}")
        unknown = set(message) - {*MESSAGE_FIELDS, "metadata"}
        if unknown:
            raise InvalidInput(where, f"unknown field(s) {sorted(unknown)}; allowed {sorted({*MESSAGE_FIELDS, 'metadata'})}")
        if not message.get("message_id"):
            raise InvalidInput(f"{where}.message_id", "required (it makes re-publishing idempotent)")
        # a message's metadata travels beside it, on the event (``schemas.events.MessageAdded``)
        body = {k: v for k, v in message.items() if k != "metadata"}
        event = events.message_added(
            event_id=events.stable_event_id("message", self.agent_id, session_id, str(message["message_id"])),
            agent_id=self.agent_id, session_id=session_id, message=body, now=now, metadata=message.get("metadata"),
            **fields,
        )
        parsed = parse_event(event, max_message_bytes=self.settings.max_message_bytes)
        if isinstance(parsed, Rejection):
            first, more = parsed.errors[0], len(parsed.errors) - 1
            raise InvalidInput(_message_field(where, first.field), first.reason + (f" (and {more} more)" if more else ""))
        return event

    def on_session_start(self, *, session_id: str, user_ids: Sequence[str]) -> None:
        """Store the session's humans on the session (merged with those already known), so
        that every process and the formation apply the group-chat rule before its first
        message is stored, and warm each user's context cache. A session id of another agent
        is refused (``InvalidInput``)."""
        _require("session_id", session_id)
        humans = _user_ids(user_ids)
        own_session.refuse_strangers(self.agent_id, session_id, humans, "user_ids")
        self.store.ingest.declare_session_users(session_id, self.agent_id, humans)
        for user in humans or [None]:
            self.get_memory_context(session_id=session_id, user_id=user)

    def on_session_end(self, *, session_id: str) -> None:
        """Publish ``session.ended``: the workers form what is left and consolidate."""
        _require("session_id", session_id)
        now = self.clock.now()
        self.publisher.publish([events.session_ended(
            event_id=events.stable_event_id("ended", self.agent_id, session_id, now.isoformat()),
            agent_id=self.agent_id, session_id=session_id, ended_at=now,
        )])

    def wait(self, *, session_id: str, timeout_s: float = 60.0) -> bool:
        """Only a service whose worker runs in this process can tell when formation is done
        (``workers.client.InProcessMemory``, the ``memory://`` broker). No coroutine twin (its
        name would be the keyword ``await``): ``await asyncio.to_thread(memory.wait, ...)``."""
        raise ConfigurationError(
            "wait: memory is formed by workers in their own processes, which this process cannot "
            "watch; set MEMORY_BROKER_URL=memory:// to form it in this process, or read the context "
            "again at the next reply")

    def process_cold_session(self, *, session_id: str) -> str | None:
        """Form a cold session now instead of waiting for the sweep: claim its unformed range
        with the cold rule (atomically, exactly as beat's sweep does, so the two never both
        win) and start the run's chain. Returns the run id, or None when the session is not
        cold, has too few unformed messages, or another claim holds it. Raises
        ``TransientError`` when the broker did not take the run; the claim is then released
        (the run is ``failed``) and beat's stale-run retry starts it."""
        _require("session_id", session_id)
        session = self.store.ingest.get_session(session_id)
        if session is None or session.agent_id != self.agent_id:
            return None
        now = self.clock.now()
        run = self.store.runs.try_claim(
            session_id, cold_rule(self.settings, now), new_run(session_id, self.agent_id, "cold", now), now,
            self.settings.claim_lease_s,
        )
        if run is None:
            return None
        start_runs(self.store.runs, [run.run_id], self._run_starter, now)
        return run.run_id

    # ----------------------------------------------------------------- stats ---------------
    def export_user(self, user_id: str) -> Iterator[dict[str, Any]]:
        """Everything this agent stores about ``user_id``, as JSON-ready records
        (``pipeline.export``: messages, facts with history, reflections, blob sections, costs)."""
        from pipeline.export import export_user

        return export_user(self.store, user_id, self.agent_id)

    def get_memory_stats(self, *, user_id: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        """Per scope: words of its blob, reflection counts, fact counts and timestamps, and the
        tokens and cost of the model calls that formed it (``pipeline.cost``). Counts and sums
        come from the store; only the unabsorbed buffer (bounded by the consolidation
        threshold) is read, for its words."""
        _id("user_id", user_id), _id("session_id", session_id)
        return stats.memory_stats(self.store, self.agent_id, user_id=user_id, session_id=session_id)

    def get_consolidation_status(self, *, user_id: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        """Per scope: buffered reflections against the consolidation threshold, the blob's
        words against its limit, and whether a consolidation is due."""
        _id("user_id", user_id), _id("session_id", session_id)
        return stats.consolidation_status(self.store, self.settings, self.agent_id, user_id=user_id,
                                          session_id=session_id)

    # ----------------------------------------------------------------- asyncio -------------
    async def aget_memory_context(
        self, *, session_id: str, user_id: str | None, force_refresh: bool = False, max_tokens: int | None = None,
        as_of: datetime | None = None, query: str | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        return await asyncio.to_thread(
            self.get_memory_context, session_id=session_id, user_id=user_id, force_refresh=force_refresh,
            max_tokens=max_tokens, as_of=as_of, query=query, categories=categories, metadata=metadata,
        )

    async def asearch_facts(
        self, query: str | Sequence[str], *, session_id: str, user_id: str | None, top_k: int = 10,
        debug: bool = False, as_of: datetime | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]] | dict[str, Any]:
        return await asyncio.to_thread(
            self.search_facts, query, session_id=session_id, user_id=user_id, top_k=top_k, debug=debug, as_of=as_of,
            categories=categories, metadata=metadata,
        )

    async def afind_facts(
        self, query: str | Sequence[str], *, session_id: str, user_id: str | None, top_k: int = 10,
        debug: bool = False, as_of: datetime | None = None, categories: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Found:
        return await asyncio.to_thread(
            self.find_facts, query, session_id=session_id, user_id=user_id, top_k=top_k, debug=debug, as_of=as_of,
            categories=categories, metadata=metadata,
        )

    async def atool_definition(self, *, session_id: str, user_id: str | None) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.tool_definition, session_id=session_id, user_id=user_id)

    async def amaybe_form_memories(self, messages: Sequence[Mapping[str, Any]], *, session_id: str, **kwargs) -> int:
        return await asyncio.to_thread(self.maybe_form_memories, messages, session_id=session_id, **kwargs)

    async def aon_session_start(self, *, session_id: str, user_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.on_session_start, session_id=session_id, user_ids=user_ids)

    async def aon_session_end(self, *, session_id: str) -> None:
        await asyncio.to_thread(self.on_session_end, session_id=session_id)

    async def aprocess_cold_session(self, *, session_id: str) -> str | None:
        return await asyncio.to_thread(self.process_cold_session, session_id=session_id)

    async def aget_memory_stats(self, *, user_id: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.get_memory_stats, user_id=user_id, session_id=session_id)

    async def aget_consolidation_status(
        self, *, user_id: str | None = None, session_id: str | None = None,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(self.get_consolidation_status, user_id=user_id, session_id=session_id)


def _require(field: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a non-empty string")
    _id(field, value)


def _id(field: str, value: object) -> None:
    """``value`` checked as an id every door takes (``schemas.values``); None passes."""
    if value is None:
        return
    try:
        _ID.validate_python(value)
    except ValidationError as exc:
        raise InvalidInput(field, f"{exc.errors()[0]['msg']} (got {value!r:.40})") from None


def _message_field(where: str, field: str) -> str:
    """An event's field path (``message.content``, ``session_users.1``) as the caller of
    ``maybe_form_memories`` spelled it (``messages[0].content``, ``session_users[1]``)."""
    parts = field.split(".")
    path = {"message": where, "metadata": f"{where}.metadata"}.get(parts[0], parts[0])
    for part in parts[1:]:
        path += f"[{part}]" if part.isdigit() else f".{part}"
    return path


def _senders(built: Sequence[Mapping[str, Any]]) -> list[str]:
    """The senders of the user turns among ``built`` events: humans of the session at ingest."""
    return [e["message"]["sender_id"] for e in built if e["message"].get("role") == "user" and e["message"].get("sender_id")]


def _user_ids(user_ids: Sequence[str]) -> list[str]:
    """The declared humans, each checked as an event's ``session_users`` entry is, in order,
    without repeats."""
    if isinstance(user_ids, (str, bytes)) or not isinstance(user_ids, Sequence):
        raise InvalidInput("user_ids", f"expected a list of user ids, got {type(user_ids).__name__}")
    for i, user in enumerate(user_ids):
        _id(f"user_ids[{i}]", user)
    return list(dict.fromkeys(user_ids))

