"""The reflection port (design §7): reflections buffered per scope key until a consolidation
absorbs them into the scope's blob. Part of ``pipeline.store.port.Store``."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from schemas.documents import Reflection


class ReflectionStore(Protocol):
    """Reflections, and their absorption into a blob."""

    @abc.abstractmethod
    def insert_reflections(self, reflections: Sequence[Reflection]) -> int:
        """Insert those whose ``reflection_id`` is new; returns how many were new."""

    @abc.abstractmethod
    def unabsorbed_reflections(self, agent_id: str, scope_key: str, limit: int | None = None) -> list[Reflection]:
        """Buffered reflections, oldest first."""

    @abc.abstractmethod
    def count_unabsorbed(self, agent_id: str, scope_keys: Sequence[str]) -> dict[str, int]: ...

    @abc.abstractmethod
    def mark_absorbed(self, reflection_ids: Sequence[str], blob_version: int, now: datetime) -> int:
        """Exactly these, if not yet absorbed: ``absorbed``, ``absorbed_at``, ``consolidated_into``."""

    @abc.abstractmethod
    def edit_reflection(self, reflection_id: str, content: str, now: datetime, by: str) -> Reflection | None:
        """Replace the text of a reflection not yet absorbed, its previous text appended to
        ``history`` (with ``now`` and ``by``). Atomic against ``mark_absorbed``: None when it
        is absorbed already, or gone."""

    @abc.abstractmethod
    def list_reflections(self, agent_id: str, scope_key: str, *, include_absorbed: bool = True) -> list[Reflection]: ...
