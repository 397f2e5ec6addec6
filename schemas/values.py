"""The values every door takes (HTTP API, MCP, the inspector's forms, ``MemoryService``,
``memoryctl publish``), each checked here once: ids, free text and instants.

- An **id** is 1 to 128 printable characters: no control character (C0, DEL), no lone
  surrogate. Ids travel in paths, headers and logs, where a control character would split or
  hide a line.
- **Free text** (a message, an edit, a query, a name) refuses NUL and lone surrogates (half of a
  UTF-16 pair, which no UTF-8 encoder writes): the store's encoders (SQLite's, BSON's) fail on
  a surrogate, and a NUL ends the text for any C-string reader and is no character of the XML
  context the agent reads, later and far from the caller. Other control characters are kept
  as written (the producer contract keeps a chat message as it was sent).
- An **instant** lies from ``EARLIEST`` up to ``LATEST`` (UTC): memory began after the first
  and reads subtract and add windows of days, which at year 1 or 9999 overflow Python's
  datetime. A time outside is refused where it enters, never a 500 later.

Each check raises ``PydanticCustomError`` (pydantic reports it as the field's error, message
as written) through the annotated types, or ``ValueError`` through ``check_*``.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, StringConstraints
from pydantic_core import PydanticCustomError

ID_MAX_CHARS = 128
EARLIEST = datetime(1900, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(3000, 1, 1, tzinfo=timezone.utc)
_SPAN = f"from {EARLIEST:%Y-%m-%d}T00:00:00Z up to (not including) {LATEST:%Y-%m-%d}T00:00:00Z"
_NUMBER = re.compile(r"^\s*[-+]?\d+(\.\d*)?([eE][-+]?\d+)?\s*$")


def _name(code: int) -> str:
    if code == 0:
        return "a NUL character"
    if 0xD800 <= code <= 0xDFFF:
        return "a lone surrogate (half of a UTF-16 pair: not valid Unicode)"
    return "a control character"


def text_problem(value: str, *, id_rules: bool = False) -> str | None:
    """Why ``value`` cannot be stored as free text (with ``id_rules``: as an id, where every
    control character is refused too), naming the first bad character and where it is; None
    when it can."""
    for i, ch in enumerate(value):
        code = ord(ch)
        if code == 0 or 0xD800 <= code <= 0xDFFF or (id_rules and (code < 0x20 or code == 0x7F)):
            return f"contains U+{code:04X}, {_name(code)}, at character {i}"
    return None


def check_text(value: str) -> str:
    """``value`` if it is storable free text, else ``ValueError`` saying which character."""
    problem = text_problem(value)
    if problem:
        raise ValueError(f"{problem}; text must be valid Unicode without NUL")
    return value


def check_id_chars(value: str) -> str:
    """``value`` if every character of it may be in an id, else ``ValueError`` saying which."""
    problem = text_problem(value, id_rules=True)
    if problem:
        raise ValueError(f"{problem}; an id is printable text")
    return value


def check_instant(value: datetime) -> datetime:
    """``value`` in UTC (a naive one is read as UTC) if it lies in the accepted span, else
    ``ValueError`` naming the span."""
    try:
        utc = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except OverflowError:  # e.g. 0001-01-01T00:00+14:00 is in year 0 in UTC
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise ValueError(f"must be {_SPAN}, got {value.isoformat()}")
    return utc


def _pydantic(check, kind: str):
    """``check`` as a pydantic validator whose message reads as written (no "Value error, ")."""
    def validate(value: Any) -> Any:
        if not isinstance(value, (str, datetime)):
            return value  # the type's own check names the wrong type
        try:
            return check(value)
        except ValueError as exc:
            raise PydanticCustomError(kind, str(exc)) from None

    return validate


#: the characters of an id, checked before any length or pattern (put it after them)
IdChars = BeforeValidator(_pydantic(check_id_chars, "id_character"))
#: an opaque id (ObjectId hex, UUID, anything printable), 1 to 128 characters; the pattern
#: states the rule in the OpenAPI document, the validator before it names the character
Id = Annotated[str, StringConstraints(min_length=1, max_length=ID_MAX_CHARS, pattern=r"^[^\x00-\x1f\x7f]+$"), IdChars]
#: the characters of free text, checked before any length or pattern (put it after them)
TextChars = BeforeValidator(_pydantic(check_text, "text_character"))
#: free text that may be stored or shown in the XML context
Text = Annotated[str, TextChars]
#: a point in time inside the accepted span, in UTC
InSpan = AfterValidator(_pydantic(check_instant, "instant_span"))


def _iso_only(value: Any) -> Any:
    """pydantic also reads a number as Unix time; the document says date-time, so must we."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.match(value)):
        raise ValueError("expected an ISO 8601 date-time with a timezone, e.g. 2026-05-02T10:00:00Z")
    return value


#: a point in time with its timezone, written as ISO 8601 (never a bare number), in the span
Instant = Annotated[AwareDatetime, BeforeValidator(_iso_only), InSpan]
