"""The broker ``memoryctl`` publishes to: named on stderr, and never the demo's in-process one."""

from __future__ import annotations

from pipeline.errors import ConfigurationError
from schemas.settings import Settings
from schemas.urls import mask


def check_broker(settings: Settings) -> None:
    """Refuse ``memory://``: that broker lives inside one process (the demo's worker), so an
    event published by ``memoryctl`` into it is gone when the command exits."""
    from ops.stores import announce

    if settings.broker_url.split("://", 1)[0].endswith("memory"):
        raise ConfigurationError(
            f"MEMORY_BROKER_URL={mask(settings.broker_url)!r} is the in-process broker of `make demo`: what "
            "memoryctl publishes there is lost when it exits; set it to your Redis (redis://host:6379/0)"
        )
    announce("broker", settings.broker_url)


def publisher(settings: Settings):
    """The process's publisher to the broker of ``settings``, after ``check_broker``."""
    from workers.producer import default_publisher

    check_broker(settings)
    return default_publisher()
