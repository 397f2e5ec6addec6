"""The deadline a kept sentence states, by rule (design §13 "Expiry"): "by <date>", "until
<date>", "before <date>", resolved against the message's date.

A date is a month and a day ("March 10", "10 March", "Mar 10th", with an optional year) or an
ISO date ("2026-03-10"); without a year it is the next such day on or after the message's
date. "by" and "until" include that day (the fact expires at the end of it, UTC); "before"
does not (it expires as that day starts). Anything else, or an impossible date ("February
30"), is no deadline. Returned as the answer's ISO text, which extraction reads as every
provider's (``pipeline.formation.facts.parse_expiry``).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = (r"(?P<{0}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_DAY = r"(?P<{0}>\d{{1,2}})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<{0}>\d{{4}}))?"
_DEADLINE = re.compile(
    r"\b(?P<word>by|until|till|before)\s+(?:the\s+)?(?:"
    + _MONTH.format("m1") + r"\s+" + _DAY.format("d1") + _YEAR.format("y1")
    + r"|" + _DAY.format("d2") + r"(?:\s+of)?\s+" + _MONTH.format("m2") + _YEAR.format("y2")
    + r"|(?P<iso>\d{4}-\d{2}-\d{2})"
    + r")\b",
    re.IGNORECASE,
)


def deadline(sentence: str, said_at: datetime) -> str | None:
    """The expiry the sentence's deadline sets, as ISO 8601 text, or None."""
    found = _DEADLINE.search(sentence)
    if found is None:
        return None
    day = _day(found, said_at.astimezone(timezone.utc).date())
    if day is None:
        return None
    inclusive = found["word"].lower() != "before"
    end = datetime.combine(day, time(), timezone.utc) + timedelta(days=1 if inclusive else 0)
    return end.isoformat()


def _day(found: re.Match, today: date) -> date | None:
    try:
        if found["iso"]:
            return date.fromisoformat(found["iso"])
        month = _MONTHS.index((found["m1"] or found["m2"]).lower()[:3]) + 1
        day = int(found["d1"] or found["d2"])
        year = found["y1"] or found["y2"]
        if year:
            return date(int(year), month, day)
        this_year = _valid(today.year, month, day)
        if this_year is not None and this_year >= today:
            return this_year
        return _valid(today.year + 1, month, day)
    except ValueError:
        return None


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None
