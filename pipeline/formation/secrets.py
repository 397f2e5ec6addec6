"""Secrets that are never stored as facts or reflections (design §11). Pure, standard library.

``SecretGuard.kind(text)`` names the first secret a text carries, or None:

- ``password``: a password, passphrase, passcode or PIN given in context ("my password is
  hunter2", "the wifi passphrase: ...", "pw: ...", "PIN is 4821"). The keyword must be followed
  by a value ("is", ":", "=", "set to" ...); a word that describes the secret instead of being
  it ("the password is wrong", "my PIN is in the drawer") does not count, nor does a mention
  without a value ("I forgot my password"), unless plain words go on after it as a passphrase
  does ("my passphrase is correct horse battery staple"). The keyword's own phrase ends at a
  whole word: "are" inside "Password for the shared drive: ..." is no connector.
- ``api_key``: a token with a well-known provider prefix (``sk-``, ``sk-proj-``, ``ghp_``,
  ``github_pat_``, ``xoxb-``, ``AKIA``, ``AIza``, ``glpat-`` ...), a ``Bearer`` token, a JWT,
  a PEM private key; or a high-entropy string given as the value of a "key", "token" or
  "secret" ("the API key is 9fK2mQ..."). "The key point is ..." carries no such value.
- ``card``: 13 to 19 digits (spaces or dashes between groups) that pass the Luhn check and
  start like a payment card (2-6, ISO/IEC 7812 issuer categories), not after a ``+`` (an
  international phone number). A 16-digit order number that fails Luhn is kept.
- ``iban``: an IBAN whose ISO 13616 check digits hold (mod 97 == 1).
- ``credentials``: a ``user:password`` pair, a URL with a password in it, a username and a
  password stated together (``pipeline.formation.credentials``).
- ``government_id``: a social security, passport, national id (and the like) number after its
  context words (``pipeline.formation.government_ids``).
- ``access_code``: a door, gate, alarm, safe (and the like) code or combination with its
  digits (``pipeline.formation.credentials``).
- ``custom``: any of the operator's extra patterns (``MEMORY_SECRET_PATTERNS``).

A hexadecimal string alone is not a secret: "fixed in commit 3f9a2c4e..." is kept, because a
commit sha, a hash or a build id is something a team needs to remember. The same string given
as a token's or secret's value is dropped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

from pipeline.formation.credentials import access_code, credentials
from pipeline.formation.government_ids import government_id

# --- passwords, passphrases, PINs -----------------------------------------------------------

_PASSWORD = re.compile(
    r"\b(?P<keyword>password|passphrase|pass phrase|passcode|passwd|pwd|pw|pin(?:\s+(?:code|number))?)s?\b"
    r"(?:\s+(?:for|of|to|on)\s+(?:[\w'.-]+\s+){0,3}?[\w'.-]+)?"        # "... for the office wifi"
    # a word connector is a whole word after a space: "are" inside "shared" is none (a match
    # that ended there hid "Password for the shared drive: tulip42"); a symbol may touch
    r"(?P<connector>\s+(?:(?:(?:is|was|has\s+been)\s+)?(?:set|changed|updated|reset)\s+to|is\s+now|is|was|are|now)\b"
    r"|\s*(?:=|:|->))\s*"
    r"[\"'`\u201c\u2018]?(?P<value>[^\s\"'`\u201d\u2019]+(?:\s+[^\s\"'`\u201d\u2019]+){0,5})",
    re.IGNORECASE,
)
# "the password hunter2", "PIN 4821": no connector, so the value must look made up (a digit or
# a symbol in it); "password reset" or "password manager" is a word, not a value.
_PASSWORD_BARE = re.compile(
    r"\b(?:password|passphrase|passcode|passwd|pwd|pw|pin(?:\s+(?:code|number))?)\s+"
    r"[\"'`\u201c\u2018]?(?=[^\s\"'`]*[\d!@#$%^&*?])[^\s\"'`\u201d\u2019]{4,}",
    re.IGNORECASE,
)
# Words after "password is" that describe the secret instead of being it.
_NOT_A_VALUE = frozenset("""
    a an the in on at by of for to with from into under not no never still also just too very now
    same different required mandatory optional needed wrong incorrect correct right invalid valid
    expired expiring reset changed updated stored saved written kept shared sent missing empty
    blank weak strong long short secure insecure protected encrypted hashed case-sensitive
    sensitive known unknown lost forgotten somewhere written-down below above attached there here
    it this that these those my your his her their our its changing rotating managed rotated reused
    generated checked enforced hidden printed taped case four six eight twelve digits characters
""".split())

# Words that carry a sentence on after a describing word ("the password is wrong again", "is
# stored in the vault", "is correct, Maya said"): the describing word was a description.
_CONTINUES = frozenset("""
    and or but so nor yet because if when whenever while until since though although unless as than
    again every each all any anymore enough twice once always usually often sometimes today
    yesterday tomorrow tonight last next week month year day days weeks months years ago then
    said says say told tells think thinks thought according apparently please
    is are was were be been being has have had do does did will would can could should may might must
""".split())
#: plain words after a describing word that make it the first word of a passphrase
_PASSPHRASE_TAIL = 2

# --- API keys and tokens ---------------------------------------------------------------------

_TOKEN_PREFIXES = re.compile(
    r"(?<![\w-])(?:"
    r"sk-(?:proj-|ant-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"      # OpenAI, Anthropic ...
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"                              # Stripe secret keys
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"               # GitHub
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"                                         # Slack
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"                                             # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{35}"                                                 # Google API keys
    r"|glpat-[A-Za-z0-9_-]{20,}"                                              # GitLab
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"         # JWT
    r")"
    r"|\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*"
    r"|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"
)
# A value given to a key, token or secret: "api key: X", "token=X", "the secret is X".
_KEYED_VALUE = re.compile(
    r"\b(?:api[\s_-]?key|access[\s_-]?key|secret[\s_-]?key|private[\s_-]?key|key|tokens?|secrets?"
    r"|client[\s_-]?secret|credentials?)\b"
    r"(?:\s+(?:for|of|to)\s+(?:[\w'.-]+\s+){0,3}?[\w'.-]+)?"
    r"\s*(?:is|was|=|:|->|set\s+to)?\s*[\"'`]?(?P<value>[A-Za-z0-9+/_.=~-]{16,})",
    re.IGNORECASE,
)
_MIN_ENTROPY_BITS = 3.0   # per character; English words and ids sit below, random keys above


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _random_looking(value: str) -> bool:
    """Long, mixed letters and digits, high per-character entropy: a generated credential."""
    value = value.rstrip(".=")
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return len(value) >= 16 and has_digit and has_alpha and _entropy(value) >= _MIN_ENTROPY_BITS


# --- IBAN (ISO 13616) ----------------------------------------------------------------------------

_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b", re.IGNORECASE)


def iban_valid(compact: str) -> bool:
    """The ISO 13616 check: move the first four characters to the end, letters to 10..35,
    and the number mod 97 must be 1."""
    compact = compact.upper()
    if not 15 <= len(compact) <= 34 or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def _iban(text: str) -> bool:
    """Printed IBANs come whole or in groups of four: the match may run into a following
    word, so every cut at a group boundary is tried (never inside a group)."""
    for match in _IBAN.finditer(text):
        groups = match.group(0).split(" ")
        cuts = ["".join(groups[: n + 1]) for n in range(len(groups))]
        if any(iban_valid(c) for c in cuts):
            return True
    return False


# --- payment cards (Luhn) ----------------------------------------------------------------------

_DIGIT_GROUPS = re.compile(r"(?<![\d+])(?<!\+\s)\d+(?:[ -]\d+)*(?!\d)")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _card(text: str) -> bool:
    """A run of digit groups of 13-19 digits that starts like a card and passes Luhn. Inside a
    longer run ("order 12 4111 1111 1111 1111") only card-shaped groups of 4-6 digits are
    tried; digits inside an IBAN-shaped token are the IBAN's, not a card's."""
    for match in _DIGIT_GROUPS.finditer(_IBAN.sub(" ", text)):
        groups = re.split(r"[ -]", match.group(0))
        if _card_digits("".join(groups)):
            return True
        for i in range(1, len(groups)):
            digits = ""
            for group in groups[i:]:
                if not 4 <= len(group) <= 6:
                    break
                digits += group
                if _card_digits(digits):
                    return True
    return False


def _card_digits(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits)


# --- the guard -----------------------------------------------------------------------------------

#: each kind as a refusal names it (an API error, a page): what was found, never the value
KIND_NAMES = {
    "password": "a password, passphrase or PIN", "credentials": "sign-in credentials (a user name with its password)",
    "api_key": "an API key or token", "card": "a payment card number", "iban": "an IBAN",
    "government_id": "a government identifier (social security, passport or national id number)",
    "access_code": "an access code (door, gate, alarm or safe)", "custom": "a pattern this deployment treats as secret",
}


class SecretGuard:
    """Finds secrets in texts; ``extra`` are regular expressions that count as secrets too
    (``Settings.secret_patterns``, checked to compile when the settings are read)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self._extra = tuple(re.compile(p) for p in extra)

    def kind(self, text: str) -> str | None:
        """The kind of the first secret ``text`` carries, or None."""
        for match in _PASSWORD.finditer(text):
            if _password_value(match.group("keyword"), match.group("connector"), match.group("value")):
                return "password"
        if _PASSWORD_BARE.search(text):
            return "password"
        if credentials(text):
            return "credentials"
        if _TOKEN_PREFIXES.search(text):
            return "api_key"
        if any(_random_looking(m.group("value")) for m in _KEYED_VALUE.finditer(text)):
            return "api_key"
        if _card(text):
            return "card"
        if _iban(text):
            return "iban"
        if government_id(text):
            return "government_id"
        if access_code(text):
            return "access_code"
        if any(p.search(text) for p in self._extra):
            return "custom"
        return None


def _password_value(keyword: str, connector: str, value: str) -> bool:
    """After ":" or "=" anything is the value; after "is" a describing word is not. A PIN is
    digits ("pin: the venue map" is a pinned link)."""
    first = value.split()[0].strip(".,;!?)")
    if keyword.lower().startswith("pin"):
        return any(c.isdigit() for c in first)
    if connector.strip() in (":", "=", "->"):
        return bool(first)
    if first.lower() in _NOT_A_VALUE:
        return _passphrase(value.split())
    return len(first) >= 3


def _passphrase(words: list[str]) -> bool:
    """"my passphrase is correct horse battery staple": a describing word ("correct") is the
    first word of a passphrase when at least ``_PASSPHRASE_TAIL`` plain words follow it with
    no punctuation between, none of them a word that carries a sentence on ("the password is
    correct so you can log in", "is stored in the vault" stay descriptions)."""
    if not words or not words[0].isalpha():
        return False
    tail = 0
    for word in words[1:]:
        bare = word.rstrip(".,;!?)")
        if not bare.isalpha() or bare.lower() in _NOT_A_VALUE or bare.lower() in _CONTINUES:
            break
        tail += 1
        if bare != word:   # punctuation ends the phrase
            break
    return tail >= _PASSPHRASE_TAIL
