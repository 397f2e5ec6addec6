"""Values typed into the inspector's forms that more than one page reads the same way."""

from __future__ import annotations

from api.ui.web import UiError
from pipeline.errors import InvalidInput
from pipeline.formation.facts import parse_expiry
from pipeline.search.filter_text import metadata_pairs


def expiry_change(expires: str, no_expiry: bool) -> dict:
    """A fact edit's ``expires_at`` from a form, as the JSON body would carry it: a date (its
    end, UTC, as extraction and ``memoryctl curate --expires`` read one) sets it, the "no end
    date" box removes it (``None``), neither leaves it as it is (the field is left out, as a
    JSON client leaves it out). Raises ``UiError`` naming the form's field."""
    if no_expiry:
        if expires.strip():
            raise UiError(422, "invalid request", "form expires", "give a date or tick \"no end date\", not both")
        return {"expires_at": None}
    if not expires.strip():
        return {}
    found = parse_expiry(expires)
    if found is None:
        raise UiError(422, "invalid request", "form expires", f"expected a date such as 2027-03-10, got {expires!r:.60}")
    return {"expires_at": found}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def metadata_change(metadata: str, shown: str) -> dict:
    """A fact edit's ``metadata`` from a form's ``KEY=VALUE`` lines (read as the search
    playground's), as the JSON body would carry it: left as the page showed it (``shown``), the
    field is left out and the fact keeps its metadata, so an edit of the text alone is not
    refused over a key the agent no longer marks; changed, the lines replace it (none: {}).
    Raises ``UiError`` naming the form's field."""
    if _lines(metadata) == _lines(shown):
        return {}
    try:
        return {"metadata": metadata_pairs(_lines(metadata), "form metadata") or {}}
    except InvalidInput as exc:
        raise UiError(422, "invalid request", exc.field, exc.reason) from None
