"""``--category`` and ``--meta`` of ``memoryctl search`` and ``memoryctl context`` (design §13
"Categories and metadata"): the filter as options, and its errors named by the option a
person typed (``--category``, ``--meta tier``) rather than by the service's argument names."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pipeline.errors import InvalidInput
from pipeline.search.filter_text import metadata_pairs

T = TypeVar("T")
_METADATA_FIELD = re.compile(r"^metadata\.(.+?)(\[\d+\])?$")


def add_filter_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--category", action="append", default=[], metavar="NAME",
                        help="only facts filed under this category of the agent; repeat for any of several")
    parser.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                        help="only facts holding this value of a filterable metadata key; the same key again: any "
                             "of its values, another key: both. VALUE is JSON when it is a number, true/false or a "
                             "quoted string (tier=2 the number, code='\"2\"' the string), else the text itself")


def filter_of(args: argparse.Namespace) -> dict[str, Any]:
    """The ``categories`` and ``metadata`` keyword arguments of a service call."""
    return {"categories": args.category or None, "metadata": metadata_pairs(args.meta, "--meta")}


def flag_named(call: Callable[[], T]) -> T:
    """``call()``, with a bad filter's ``InvalidInput`` naming the option: ``categories[1]``
    becomes ``--category``, ``metadata.tier[0]`` becomes ``--meta tier``."""
    try:
        return call()
    except InvalidInput as exc:
        field = exc.field
        if field == "categories" or field.startswith("categories["):
            raise InvalidInput("--category", exc.reason) from None
        key = _METADATA_FIELD.match(field)
        if key or field == "metadata":
            raise InvalidInput(f"--meta {key.group(1)}" if key else "--meta", exc.reason) from None
        raise
