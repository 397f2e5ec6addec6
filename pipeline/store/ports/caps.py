"""The spend-caps port (design §13 "Operator controls"): the caps set at run time, per agent
and global (owner ``schemas.caps.GLOBAL``). What they replace, the settings' defaults, and
how spend is read against them: ``pipeline.caps``. Part of ``pipeline.store.port.Store``.
"""

from __future__ import annotations

import abc
from datetime import datetime
from typing import Protocol

from schemas.caps import SpendCaps


class CapStore(Protocol):
    """One row of caps per owner: an agent id, or ``GLOBAL`` for every agent together."""

    @abc.abstractmethod
    def put_spend_caps(self, owner: str, caps: SpendCaps | None, now: datetime) -> None:
        """Set the owner's caps (replacing any); None removes them (the settings' default applies again)."""

    @abc.abstractmethod
    def get_spend_caps(self, owner: str) -> SpendCaps | None:
        """The owner's caps set at run time; None when none are."""

    @abc.abstractmethod
    def list_spend_caps(self) -> dict[str, SpendCaps]:
        """Every owner's caps set at run time."""
