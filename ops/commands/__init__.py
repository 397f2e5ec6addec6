"""Sub-commands of ``memoryctl``; each module defines ``register(subparsers)``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pipeline.errors import InvalidInput
from pipeline.search.filter_text import pair_value


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


def meta_pair(text: str) -> tuple[str, Any]:
    """An argparse type for ``--meta KEY=VALUE`` (``schemas.metadata``): VALUE read as the
    filters of ``memoryctl search --meta`` read it (``pipeline.search.filter_text.pair_value``),
    so that a value typed the same way means the same value when published and when searched;
    the key and value are judged where they are used."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, pair_value(raw)


def meta_dict(pairs: Sequence[tuple[str, Any]] | None) -> dict[str, Any] | None:
    """The ``--meta`` pairs as one object (None when none was given); a key given twice is
    refused rather than one value silently winning."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidInput(f"--meta {key}", "is given twice; give each key once")
        out[key] = value
    return out
