"""The broker ``memoryctl`` publishes to: named on stderr, and never the demo's in-process one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.errors import ConfigurationError
from pipeline.publisher import Publisher
from schemas.settings import Settings
from schemas.urls import mask


def in_process(settings: Settings) -> bool:
    """Whether the broker is ``memory://``: one that lives inside one process (the demo's worker)."""
    return settings.broker_url.split("://", 1)[0].endswith("memory")


def _lost(settings: Settings) -> str:
    return (f"MEMORY_BROKER_URL={mask(settings.broker_url)!r} is the in-process broker of `make demo`: what "
            "memoryctl publishes there is lost when it exits; set it to your Redis (redis://host:6379/0)")


def check_broker(settings: Settings) -> None:
    """Refuse ``memory://``: an event published by ``memoryctl`` into it is gone when the
    command exits."""
    from ops.stores import announce

    if in_process(settings):
        raise ConfigurationError(_lost(settings))
    announce("broker", settings.broker_url)


class RefusingPublisher(Publisher):
    """The publisher of a reader started over the demo's in-process broker (``memoryctl mcp``
    on the demo store): reads work, and every publish is refused, naming the setting, instead
    of being accepted into a broker that no worker reads."""

    def __init__(self, settings: Settings) -> None:
        self.reason = _lost(settings)

    def publish(self, events: Sequence[dict[str, Any]]) -> int:
        raise ConfigurationError(self.reason)


def publisher(settings: Settings):
    """The process's publisher to the broker of ``settings``, after ``check_broker``."""
    from workers.producer import default_publisher

    check_broker(settings)
    return default_publisher()
