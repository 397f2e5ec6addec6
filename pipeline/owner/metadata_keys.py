"""The agent's filterable metadata keys (design §13 "Categories and metadata"): which keys of
a message's ``metadata`` the facts formed from it keep, and filters may name. Pure functions
over ``AgentSettings``.

None by default: a platform's metadata may hold anything (a customer's email, a ticket
number), and a fact keeps only what its owner chose to keep. Setting the keys applies to facts
formed afterwards; a fact already formed keeps what it has. A key is checked as an event's
(``schemas.metadata.KEY``), so a marked key is one a message can carry; at most
``MAX_FILTERABLE`` keys, each once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pipeline.errors import InvalidInput
from schemas.documents import AgentSettings
from schemas.metadata import KEY, MAX_KEYS, MAX_VALUES, value_problem

#: as many keys as one message may carry: more could never all come from one message
MAX_FILTERABLE = MAX_KEYS


def check_keys(keys: Sequence[object], where: str = "metadata_keys") -> list[str]:
    """The keys as stored, in order; ``InvalidInput`` naming the first bad or repeated one."""
    if len(keys) > MAX_FILTERABLE:
        raise InvalidInput(where, f"has {len(keys)} keys; an agent marks at most {MAX_FILTERABLE} filterable")
    seen: list[str] = []
    for i, key in enumerate(keys):
        if not isinstance(key, str) or not KEY.match(key):
            raise InvalidInput(f"{where}[{i}]", f"{repr(key)[:70]} is not a metadata key: a letter, then letters, "
                                                 "digits, _, . or -, at most 64 characters")
        if key in seen:
            raise InvalidInput(f"{where}[{i}]", f"{key!r} is given twice; give each key once")
        seen.append(key)
    return seen


def set_keys(agent: AgentSettings, keys: Sequence[object], *, now: datetime,
             where: str = "metadata_keys") -> AgentSettings:
    """The settings with ``keys`` (checked) as the filterable keys; [] keeps no metadata."""
    return agent.model_copy(update={"metadata_keys": check_keys(keys, where), "updated_at": now})


def check_given(metadata: Mapping[str, Any], allowed: Sequence[str], where: str = "metadata", *,
                held: bool = False) -> dict[str, Any]:
    """The metadata a person gives a fact directly (a direct write, an import line): each key
    one of the agent's filterable ``allowed`` keys and each value a metadata value, else
    ``InvalidInput`` naming ``where.<key>`` (and, for a key, the keys it must come from). With
    ``held`` (a correction of a fact's metadata), a key may hold a list of values, as a fact
    holds those its messages disagreed on: 1 to ``MAX_VALUES`` of them."""
    if not isinstance(metadata, Mapping):
        raise InvalidInput(where, f"expected an object of key/value pairs, got {type(metadata).__name__}")
    # a field's key is a path (``metadata.tier``); an option's, a word after it (``--meta tier``)
    joint = " " if where.startswith("--") else "."
    for key, value in metadata.items():
        if not isinstance(key, str) or not KEY.match(key):
            # named by its repr: a key such as a lone surrogate cannot be part of an answer's ``where``
            raise InvalidInput(where, f"{repr(key)[:70]} is not a metadata key: a letter, then letters, digits, "
                                      "_, . or -, at most 64 characters")
        if key not in allowed:
            listed = ", ".join(allowed) if allowed else "(the agent has none; set them with metadata-keys)"
            raise InvalidInput(f"{where}{joint}{key}", f"is not one of the agent's filterable keys: {listed}")
        if held and isinstance(value, list):
            _check_values(value, f"{where}{joint}{key}")
        elif problem := value_problem(value):
            raise InvalidInput(f"{where}{joint}{key}", problem)
    return dict(metadata)


def _check_values(values: list[Any], where: str) -> None:
    if not 1 <= len(values) <= MAX_VALUES:
        raise InvalidInput(where, f"holds {len(values)} values; a key holds 1 to {MAX_VALUES}")
    for i, value in enumerate(values):
        if problem := value_problem(value):
            raise InvalidInput(f"{where}[{i}]", problem)
