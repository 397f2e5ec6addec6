"""Contact data that agent-scope memory must not carry (design §11). Pure, standard library.

Agent-scope memory is shown to every user of the agent, so an agent-scope item that carries a
person's email address, phone number or user id does not belong there. ``contact_kind(text,
user_ids)`` names what it carries, or None:

- ``email``: an email address, except a role address of an organisation (``info@``,
  ``bookings@``, ``support@`` ...): "Bookings go through events@venue.example" is team
  knowledge, "Reach Maya at maya.chen@lumen.example" is not.
- ``phone``: an international number (``+`` or ``00`` then 8-15 digits), a number written in
  phone groups with dashes, dots or brackets ("555-0142", "(21) 555-0199"), or 7-15 digits
  right after a phone word ("call", "phone", "mobile", "WhatsApp" ...). Dates ("2026-03-14"),
  year ranges ("2019-2023") and amounts ("12,000 euros") are not phones.
- ``user_id``: the id of a human of the session, as a whole token ("user-maya"); ids shorter
  than 3 characters are too likely to be ordinary words or numbers to be looked for.

Names alone are allowed: "Tom handles the AV" is team knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_EMAIL = re.compile(r"(?<![\w.+-])([\w.+-]+)@[\w-]+(?:\.[\w-]+)+")
# Shared mailboxes of an organisation, not one person's address.
_ROLE_MAILBOXES = frozenset("""
    info contact contacts hello support help sales bookings booking reservations events press media
    office admin team noreply no-reply enquiries inquiries orders billing accounts invoices careers
    jobs hr marketing partners service customerservice frontdesk reception
""".split())

_INTERNATIONAL = re.compile(r"(?<![\w+])(?:\+|\b00)[1-9][\d\s().-]{6,20}\d")
_GROUPED = re.compile(
    r"(?<![\w.-])(?:\(\d{2,4}\)\s?\d{3,4}[-.\s]\d{3,4}|\d{2,4}[-.]\d{3,4}[-.]\d{3,4}|\d{3}-\d{4})(?![\w-])"
)
_DATE_LIKE = re.compile(r"^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})$")
_PHONE_WORD = re.compile(
    r"\b(?:call|phone|mobile|cell|tel|telephone|sms|whatsapp|signal)\b[^\d\n]{0,25}"
    r"(\+?\d[\d\s().-]{5,20}\d)",
    re.IGNORECASE,
)
MIN_USER_ID_CHARS = 3


def _digits(text: str) -> int:
    return sum(c.isdigit() for c in text)


def _personal_email(text: str) -> bool:
    return any(m.group(1).lower() not in _ROLE_MAILBOXES for m in _EMAIL.finditer(text))


def _phone(text: str) -> bool:
    text = _EMAIL.sub(" ", text)
    for match in _INTERNATIONAL.finditer(text):
        if 8 <= _digits(match.group(0)) <= 15:
            return True
    for match in _GROUPED.finditer(text):
        if not _DATE_LIKE.match(match.group(0)) and 7 <= _digits(match.group(0)) <= 15:
            return True
    for match in _PHONE_WORD.finditer(text):
        if 7 <= _digits(match.group(1)) <= 15 and not _DATE_LIKE.match(match.group(1).strip()):
            return True
    return False


def _user_id(text: str, user_ids: Iterable[str]) -> bool:
    for user_id in user_ids:
        if len(user_id) < MIN_USER_ID_CHARS:
            continue
        if re.search(rf"(?<![\w@.-]){re.escape(user_id)}(?![\w-])", text, re.IGNORECASE):
            return True
    return False


def contact_kind(text: str, user_ids: Iterable[str] = ()) -> str | None:
    """``email``, ``phone`` or ``user_id`` when ``text`` carries one, else None."""
    if _personal_email(text):
        return "email"
    if _phone(text):
        return "phone"
    if _user_id(text, user_ids):
        return "user_id"
    return None
