"""Sub-commands of ``memoryctl``; each module defines ``register(subparsers)``."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type for counts (``--limit``, ``--batch``): a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a count: give 1 or more")
    return value


def positive_float(text: str) -> float:
    """An argparse type for durations in seconds (``--timeout``): more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not a duration: give more than 0 seconds")
    return value
