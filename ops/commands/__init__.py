"""Sub-commands of ``memoryctl``; each module defines ``register(subparsers)``."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type for counts (``--limit``, ``--batch``): a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type for durations in seconds (``--timeout``): more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {value}")
    return value
