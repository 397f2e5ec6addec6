"""Sub-commands of ``memoryctl``; each module defines ``register(subparsers)``."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

from pipeline.errors import InvalidInput


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


_WHOLE = re.compile(r"-?(0|[1-9][0-9]*)")


def meta_pair(text: str) -> tuple[str, Any]:
    """An argparse type for ``--meta KEY=VALUE`` (``schemas.metadata``): a whole number and
    ``true``/``false`` are read as such, a JSON string in quotes (``'"2"'``) as that string,
    anything else as the text typed; the key and value are judged where they are used."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    if _WHOLE.fullmatch(raw):
        return key, int(raw)
    if raw in ("true", "false"):
        return key, raw == "true"
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            return key, str(json.loads(raw))
        except ValueError:
            pass
    return key, raw


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
