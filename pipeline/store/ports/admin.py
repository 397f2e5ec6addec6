"""The admin port (design §7): erasure and dumps.

What operators' commands, maintenance tasks and audits need; part of
``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from typing import Protocol

from pipeline.erasure import Plan, UserData


class AdminStore(Protocol):
    """Erasure and whole-store dumps (the store's lifecycle is the store's own: ``Store``)."""

    @abc.abstractmethod
    def forget_user(self, user_id: str, agent_id: str | None = None, *, dry_run: bool = False) -> dict[str, int]:
        """Delete everything of a user (under one agent, or all): user facts (history with
        them), user reflections and blobs, the user's messages, rejected events that name them,
        context caches, and their id in session user lists. A session where they were the only
        human goes whole (messages, session memory, finished runs; a run in flight is emptied
        and ends ``erased``); a group session keeps the others' and the assistant's messages
        and its session memory, loses its finished runs that name the user, and an unfinished
        one is emptied and failed, to be formed again without them. Items of other scopes
        formed from the user's messages are removed by provenance (``erase_memory``). Other
        users' data is untouched. Returns counts per collection, what was deleted apart from
        what was only rewritten: ``messages_deleted`` (the user's own, and the whole of their
        one-to-one sessions) and ``messages_rewritten`` (the others' messages of a group session,
        the user's id taken out of their user list), ``runs_deleted`` and ``runs_rewritten``
        (emptied, kept), ``sessions_rewritten``. With ``dry_run`` nothing changes and the counts
        are what it would do (the erasure's plan)."""

    @abc.abstractmethod
    def user_data(self, user_id: str, agent_id: str | None = None) -> UserData:
        """What ``pipeline.erasure.forget_plan`` decides on (the sessions the user was in and
        their humans, the runs naming them, ...), as ``forget_user`` reads it."""

    @abc.abstractmethod
    def erase_memory(self, plan: Plan) -> None:
        """Execute the removal part of a ``pipeline.erasure.Plan``: delete its facts (history
        with them), reflections and blobs, move the stamps of the scope keys it changed, and
        delete the cached contexts of every agent it changed (one may quote a removed item).
        Idempotent: what is already gone is skipped."""

    @abc.abstractmethod
    def dump_all(self) -> dict[str, list[dict]]:
        """Every stored document/row as plain dicts, per collection: for audits and tests
        only. It reads the whole store: no production path calls it (a test checks)."""
