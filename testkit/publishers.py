"""A publisher that keeps what it is handed, for tests that look at the events a
``MemoryService`` (or the HTTP API and MCP server over it) would put on the queue."""

from __future__ import annotations

from pipeline.publisher import Publisher


class RecordingPublisher(Publisher):
    """Holds every published event, in order, in ``events``."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def publish(self, events):
        self.events.extend(events)
        return len(events)
