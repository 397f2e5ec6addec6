"""What a real MongoDB server refuses in an update document, and ``mongomock-ng`` lets through
(it applies a conflicting update in some order, and fails a non-numeric ``$inc`` with a Python
``TypeError``): checked before every update the emulation applies.

- No two operators of one update may name the same path, or a path and one under it: the
  server answers ``ConflictingUpdateOperators`` (code 40), "Updating the path 'x' would create
  a conflict at 'x'" (the code's name in the server's ``src/mongo/base/error_codes.yml``; the
  real server's answer to ``$set`` with ``$min`` on ``v.foo`` and ``v`` is quoted in
  https://github.com/FerretDB/FerretDB/issues/1922, and to ``$mul`` with ``$setOnInsert`` on
  one path in https://github.com/documentdb/documentdb/issues/510).
- ``$inc`` takes numbers only: "Cannot increment with non-numeric argument" (``TypeMismatch``,
  code 14; https://www.mongodb.com/docs/manual/reference/operator/update/inc/).
"""

from __future__ import annotations

from typing import Any

from pymongo import UpdateMany, UpdateOne
from pymongo.errors import OperationFailure

_SOURCE_CONFLICT = "MongoDB error ConflictingUpdateOperators (40), src/mongo/base/error_codes.yml"
_SOURCE_INC = "https://www.mongodb.com/docs/manual/reference/operator/update/inc/"
#: calls whose update document is their second positional argument (or ``update=``)
UPDATE_CALLS = frozenset({"update_one", "update_many", "find_one_and_update"})


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def check_update(update: Any) -> None:
    """Raise ``OperationFailure`` as the server does for ``update`` (an operator document;
    pipelines and replacements are not checked here)."""
    if not isinstance(update, dict) or not all(str(k).startswith("$") for k in update):
        return
    seen: list[tuple[str, str]] = []
    for operator, fields in update.items():
        for path, value in (fields or {}).items():
            for other_op, other in seen:
                if _overlaps(path, other):
                    raise OperationFailure(
                        f"Updating the path '{path}' would create a conflict at '{min(path, other, key=len)}' "
                        f"({operator} and {other_op}) [rule: {_SOURCE_CONFLICT}]", code=40)
            seen.append((operator, path))
            if operator == "$inc" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise OperationFailure(f"Cannot increment with non-numeric argument: {{{path}: {value!r}}} "
                                       f"[rule: {_SOURCE_INC}]", code=14)


def check_call(name: str, args: tuple, kwargs: dict) -> None:
    """``check_update`` on the update document(s) of one collection call."""
    if name in UPDATE_CALLS:
        check_update(kwargs["update"] if "update" in kwargs else (args[1] if len(args) > 1 else None))
    elif name == "bulk_write":
        for request in (args[0] if args else kwargs.get("requests", ())):
            if isinstance(request, (UpdateOne, UpdateMany)):
                check_update(request._doc)
