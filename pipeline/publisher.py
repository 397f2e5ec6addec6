"""The publisher port: how code outside workers/ hands events to the queue (fire-and-forget).

The Celery implementation is ``workers.producer.CeleryPublisher``; ``pipeline`` never imports
Celery itself.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any


class Publisher(abc.ABC):
    @abc.abstractmethod
    def publish(self, events: Sequence[dict[str, Any]]) -> int:
        """Hand events (JSON-ready dicts) to the broker; returns how many the broker now holds.
        Raises ``TransientError`` when the broker cannot be reached after the configured retries."""
