"""Sign-in credentials and access codes given without a password keyword (design §11). Pure,
standard library; ``secrets.SecretGuard`` calls ``credentials`` and ``access_code``.

- ``credentials``:
  - a ``user:password`` pair: "Use credentials admin:Tr0ub4dor&3 for the router". The pair
    counts when the sentence says it is a sign-in (login, credentials, creds, account, user,
    username, sign in, ssh ...) and the part after the colon looks made up (a letter and a
    digit or a symbol), or when that part looks generated on its own (three of: upper case,
    lower case, digit, symbol; at least 6 characters): "user:group" or "www-data:www-data"
    in a sentence about users is no pair. Times (10:30), ratios (3:2), ports (host:5432),
    versions (python:3.11, nginx:1.25-alpine) and scopes (std::vector) are not pairs: the
    user part starts with a letter and the password part is neither all digits nor a version;
  - a URL carrying a password: ``scheme://user:pass@host`` (``redis://:pass@host`` too); a
    masked or templated one (``:***@``, ``:<password>@``, ``:${DB_PASS}@``) carries none;
  - a username and a password stated together: "Login for the CMS: maya / Sunflower!9",
    "username maya, pass Sunflower!9". The second value must look made up (a letter and a
    digit or a symbol in it, not a time or an ordinal): "Login for the CMS: ask Maya / Tom"
    names people, "Account for the launch: Maya, 12,000 euros" gives a budget.
- ``access_code``: a door, gate, alarm, safe, garage, lockbox, keypad, locker, entry or access
  code or combination followed by a value with at least three digits: "the door code is
  4821", "the code for the front gate: 1234#", "safe combination 12-34-56". "The dress code
  is smart casual", "the gate code changed last week" and "the door code is on the fridge"
  carry no value. PINs are ``password`` (``secrets``).
"""

from __future__ import annotations

import re

# A sign-in is being talked about: a user:password pair in such a sentence is one.
_SIGN_IN = re.compile(
    r"\b(?:log[\s-]?ins?|logon|sign[\s-]?in|credentials?|creds|accounts?|user(?:name)?s?|user[\s-]name"
    r"|ssh|ftp|sftp|basic[\s-]auth|auth|admin\s+panel|router|console)\b",
    re.IGNORECASE,
)
# word:value, the word starting with a letter and not glued to a scheme's "//" or a "::" scope
_PAIR = re.compile(r"(?<![\w:/@.-])(?P<user>[A-Za-z][\w.+-]{1,63}):(?P<password>[^\s:/@][^\s@]{3,})")
_VERSION = re.compile(r"\d+(?:\.\d+)*(?:[-_.+]?[A-Za-z][\w.-]*)?")   # 3.11, 16-alpine, 1.25.3-rc1
_URL_CREDENTIALS = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^\s/:@]*):(?P<password>[^\s/@]+)@[^\s/@]+")
_PLACEHOLDER = re.compile(r"[*x\u2022.]+|<[^>]*>|\$\{?\w+\}?|\{\{?[^}]*\}\}?|%\(?\w+\)?s?|\[[^\]]*\]", re.IGNORECASE)
_TRAILING = ".,;!?)\"'"
_TIME_OR_ORDINAL = re.compile(r"\d{1,2}(?::\d{2})?(?:am|pm|h)|\d+(?:st|nd|rd|th)", re.IGNORECASE)

# "Login for the CMS: maya / Sunflower!9", "credentials are maya and Sunflower!9"
_STATED_TOGETHER = re.compile(
    r"\b(?:log[\s-]?in|logon|sign[\s-]?in|credentials?|creds|account)\b"
    r"(?:\s+(?:for|of|to|on)\s+(?:[\w'.-]+\s+){0,3}?[\w'.-]+)?"
    r"\s*(?::|=|is|are|->)\s*[\"'`]?(?P<user>[\w.@+-]{2,})[\"'`]?"
    r"\s*(?:/|,|;|\band\b|\bwith\b)\s*[\"'`]?(?P<password>[^\s\"'`]{4,})",
    re.IGNORECASE,
)
# "username maya, pass Sunflower!9", "user: maya pw: Sunflower!9"
_USER_THEN_PASS = re.compile(
    r"\b(?:user(?:name)?|user[\s-]name|login|user\s+id)\s*(?::|=|is)?\s*[\"'`]?(?P<user>[\w.@+-]{2,})[\"'`]?"
    r"[\s,;/]+(?:and\s+)?(?:(?:the|its|their|her|his|my)\s+)?(?:pass(?:word|code)?|pw|pwd)\b\s*(?::|=|is)?\s*"
    r"[\"'`]?(?P<password>[^\s\"'`]{4,})",
    re.IGNORECASE,
)

_ACCESS_CODE = re.compile(
    r"\b(?:(?:door|front[\s-]door|gate|alarm|safe|garage|lock[\s-]?box|key[\s-]?box|keypad|locker|padlock"
    r"|entry|entrance|access|building\s+entry|lock)\s+(?:code|combination|combo)s?"
    r"|(?:code|combination|combo)\s+(?:for|of|to|on)\s+(?:the\s+|our\s+|my\s+|her\s+|his\s+|their\s+)?"
    r"(?:[\w'-]+\s+){0,2}?(?:door|gate|alarm|safe|garage|lock[\s-]?box|key[\s-]?box|keypad|locker|padlock"
    r"|entrance|building|flat|apartment|house|office|storage(?:\s+room)?|shed|bike\s+lock))\b"
    r"(?:\s+(?:is|was|has\s+been|is\s+now|now|set\s+to|changed\s+to|reads)\b|\s*[:=-])*\s*[\"'`#]?"
    r"(?P<value>[*#]?[A-Za-z]?\d[\d\s*#-]{1,14}[\d*#]|[A-Za-z]?\d{3,}[A-Za-z]?)",
    re.IGNORECASE,
)


def credentials(text: str) -> bool:
    """Whether ``text`` carries sign-in credentials: a pair, a URL with a password, or a
    username stated with a password."""
    if any(_url_password(m.group("password")) for m in _URL_CREDENTIALS.finditer(text)):
        return True
    sign_in = _SIGN_IN.search(text) is not None
    if any(_pair(m.group("password"), sign_in) for m in _PAIR.finditer(_URL_CREDENTIALS.sub(" ", text))):
        return True
    return any(_made_up(m.group("password")) for pattern in (_STATED_TOGETHER, _USER_THEN_PASS)
               for m in pattern.finditer(text))


def access_code(text: str) -> bool:
    """Whether ``text`` gives an access code or combination with at least three digits."""
    return any(sum(c.isdigit() for c in m.group("value")) >= 3 for m in _ACCESS_CODE.finditer(text))


def _url_password(password: str) -> bool:
    return not _PLACEHOLDER.fullmatch(password)


def _pair(password: str, sign_in: bool) -> bool:
    """The part after ``user:``: a password when the sentence is about signing in, or when it
    looks generated; never a number, a version or a placeholder."""
    password = password.rstrip(_TRAILING)
    if len(password) < 4 or _VERSION.fullmatch(password) or _PLACEHOLDER.fullmatch(password):
        return False
    if sign_in:
        return _made_up(password)
    classes = (any(c.isupper() for c in password), any(c.islower() for c in password),
               any(c.isdigit() for c in password), any(not c.isalnum() and c not in "-_." for c in password))
    return len(password) >= 6 and sum(classes) >= 3


def _made_up(value: str) -> bool:
    """A value no one writes as a word or a number: a letter and a digit or a symbol in it,
    after its trailing punctuation is stripped; not a time (10am), an ordinal (21st) or a
    placeholder."""
    value = value.rstrip(_TRAILING)
    return len(value) >= 4 and not _PLACEHOLDER.fullmatch(value) and not _TIME_OR_ORDINAL.fullmatch(value) \
        and any(c.isalpha() for c in value) \
        and any(c.isdigit() or (not c.isalnum() and c not in "-_.'") for c in value)
