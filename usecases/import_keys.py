"""An import line whose key is stored already (design §13 "Direct writes and import"): what
becomes of the fact under that key (``usecases.imports`` reads the lines; this decides).

- The live fact says what the line says (the same normalized text, categories, expiry and
  metadata): ``unchanged``. Importing a file twice changes nothing the second time. A line
  without ``metadata`` leaves the fact's as it is (``Importer`` reads it so); a line with it
  replaces the fact's, as an edit does.
- The line says what the fact said before (a text in its history): ``unchanged``, the line
  taken as older than the fact. An import run again after someone edited the fact does not undo
  the edit; whoever wants the older text back edits the fact.
- Otherwise the line is newer: an UPDATE with history, as an owner's edit makes one
  (``pipeline.owner.curation.edit_fact``: screened, embedded again, announced as
  ``fact.updated`` by ``import``), reported ``updated``.
- The fact under the key is retired (contradicted by newer memory, expired): the line is
  ``skipped``, naming why. An import never brings back what memory
  retired, and never retires (a line of a retired fact over a live one is skipped too); an
  export line of a retired fact over the same retired fact is ``unchanged``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pipeline.owner import curation
from pipeline.text import text_hash
from pipeline.validity import expired
from schemas.documents import Fact
from schemas.metadata import labels

Verdict = Literal["unchanged", "skipped", "update"]

RETIRED = ("the fact under this key was retired ({reason}); an import does not bring it back: add the text "
           "anew if it holds again")
RETIRES_NOTHING = "this line is of a retired fact and the one under its key is live: an import retires nothing"
OLDER = "an older text of the fact under this key: it was changed since, and the change is kept"


def _same(stored: Fact, wanted: Fact) -> bool:
    # metadata compared by its labels: typed values (1 is not true), a key's values in any order
    return (stored.hash == text_hash(wanted.content) and list(stored.categories) == list(wanted.categories)
            and stored.expires_at == wanted.expires_at and labels([], stored.metadata) == labels([], wanted.metadata))


def verdict(stored: Fact, wanted: Fact, now: datetime) -> tuple[Verdict, str | None]:
    """What the line ``wanted`` (checked, as it would be stored) does to ``stored``, the fact
    under its key, and why when it does nothing."""
    if stored.retired_at is not None or expired(stored, now):
        if wanted.retired_at is not None and stored.hash == text_hash(wanted.content):
            return "unchanged", None
        why = stored.retired_reason or ("expired" if stored.retired_at is None else "no reason recorded")
        return "skipped", RETIRED.format(reason=why)
    if wanted.retired_at is not None:
        return "skipped", RETIRES_NOTHING
    if _same(stored, wanted):
        return "unchanged", None
    new = text_hash(wanted.content)
    if new != stored.hash and new in {text_hash(h.content) for h in stored.history}:
        return "unchanged", OLDER
    return "update", None


def update(deps, stored: Fact, wanted: Fact, *, where: str) -> Fact | None:
    """``stored`` made to say ``wanted``: its text, categories, expiry (none when the line
    gives none) and metadata (replaced, as the line checked it), resting also on the line's
    person. None when it changed meanwhile or another live fact of its scope says this text.
    Raises ``InvalidInput`` naming the line's field."""
    return curation.edit_fact(
        deps, stored, wanted.content, people=wanted.source_user_ids, source_user_ids=wanted.source_user_ids,
        where=where, expires_at=wanted.expires_at, clear_expiry=wanted.expires_at is None,
        categories=wanted.categories, metadata=wanted.metadata, metadata_checked=True, source="import")
