"""How every bench ends: a few lines for a reader, then its figures as one JSON object on the
last line (what scripts and the docs' tables read)."""

from __future__ import annotations

import json
from collections.abc import Iterable


def print_result(result: dict, lines: Iterable[str] = (), *, json_only: bool = False) -> int:
    """Print ``lines`` unless ``json_only`` (``--json``), then ``result`` as one JSON line.
    ``lines`` may be a generator: with ``json_only`` it is never run. Returns 0, the exit
    status of a bench that got this far."""
    if not json_only:
        for line in lines:
            print(line)
    print(json.dumps(result))
    return 0
