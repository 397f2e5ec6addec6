"""Values typed into the inspector's forms that more than one page reads the same way."""

from __future__ import annotations

from api.ui.web import UiError
from pipeline.formation.facts import parse_expiry


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
