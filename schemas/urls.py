"""Connection URLs with credentials: a password either arrives percent-encoded inside the URL,
or on its own (``MEMORY_BROKER_PASSWORD``, ``MEMORY_STORE_PASSWORD``) and is encoded here.

A password pasted raw into a URL breaks it silently: ``@ : / ? #`` end the user part, the host
or the path early (RFC 3986 §3.2.1), so a client connects to the wrong host, port or database,
or fails with an error about something else. Such a URL is refused here with the setting's
name and the character, before any client sees it, except where every client of that scheme
reads it unambiguously: a Redis URL (``redis://``, ``rediss://``) is read by redis-py
(``redis.connection.parse_url``) and kombu (``kombu.utils.url.url_to_parts``) alike with
``urllib.parse``, whose user info ends at the *last* ``@`` of the authority and whose user
ends at the first ``:``, the password then percent-decoded. There a raw ``@`` or ``:`` in the
password, or a ``%`` that starts no escape, means what it says, and the password is
re-encoded so that every consumer (kombu, redis-py, Flower, ``workers.transport``) gets the
same canonical URL. ``/ ? #`` still end the authority there (the host would be read from the
password) and ``[ ]`` make ``urllib`` refuse the URL, so those stay refused. MongoDB's driver
refuses any raw reserved character in the user info (``pymongo.uri_parser_shared.
parse_userinfo``), and so does this module for ``mongodb://``.

No error here quotes the URL: it may hold the password. ``mask`` gives the form to show.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

#: characters that may not appear raw in a URL's user or password (RFC 3986 §3.2.1, §2.2)
RESERVED = "@:/?#[]"
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: schemes whose every client reads the user info with ``urllib.parse`` (see the docstring)
URLLIB_SCHEMES = ("redis", "rediss")
#: characters such a client reads in a password as they are (the last "@" ends the user info)
_URLLIB_PASSWORD_OK = "@:%"
MASK = "***"


def _split(url: str) -> tuple[str, str | None, str]:
    """(``scheme://``, user info or None, the rest), taking the last ``@`` before the path
    as the end of the user info (a raw ``@`` in a password comes before it)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "", None, url
    at = rest.rfind("@")
    if at < 0:
        return scheme + sep, None, rest
    return scheme + sep, rest[:at], rest[at + 1:]


def url_setting(setting: str, url: str, password: str | None, password_setting: str) -> str:
    """The URL a client gets from setting ``setting``: ``url`` checked by ``check_url``, with
    ``password`` (the value of ``password_setting``) percent-encoded into it when given."""
    url = check_url(setting, url, password_setting)
    if not password:
        return url
    prefix, _, rest = _split(url)
    if not prefix or not rest or rest.startswith("/"):
        raise ValueError(f"{password_setting} is set, but {setting} ({url.partition(':')[0]}) has no host to log in to")
    return with_password(url, password)


def check_url(setting: str, url: str, password_setting: str | None = None) -> str:
    """``url``, or ``ValueError`` naming ``setting`` and the first character of its user or
    password that must be percent-encoded (the URL itself is never quoted). A Redis URL's
    password with a raw ``@``, ``:`` or lone ``%`` is accepted, as its clients read it, and
    returned percent-encoded (see the module docstring)."""
    prefix, userinfo, _ = _split(url)
    if userinfo is None:
        return url
    user, _, password = userinfo.partition(":")
    lenient = prefix.removesuffix("://").lower() in URLLIB_SCHEMES
    for part, what in ((user, "user name"), (password, "password")):
        allowed = _URLLIB_PASSWORD_OK if lenient and what == "password" else ""
        bad = next((ch for ch in part if ch in RESERVED and ch not in allowed), None)
        if bad is None and "%" not in allowed and _PERCENT.search(part):
            bad = "%"
        if bad is not None:
            instead = f"; or leave it out of the URL and set {password_setting}, which is encoded for you" \
                if password_setting else ""
            raise ValueError(
                f"{setting}: the {what} contains {bad!r}, which must be percent-encoded in a URL "
                f"({quote(bad, safe='')}){instead}"
            )
    if lenient and (any(ch in password for ch in "@:") or _PERCENT.search(password)):
        return with_password(url, unquote(password))  # what redis-py and kombu would send
    return url


def mask(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***`` (a raw ``@`` in the
    password included), for messages and logs."""
    prefix, userinfo, rest = _split(url)
    if not userinfo or ":" not in userinfo:
        return url
    return f"{prefix}{userinfo.partition(':')[0]}:{MASK}@{rest}"


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` percent-encoded into its user info (replacing one it had)."""
    prefix, userinfo, rest = _split(url)
    if not prefix:
        raise ValueError(f"not a URL: {url!r}")
    user = (userinfo or "").partition(":")[0]
    return f"{prefix}{user}:{quote(password, safe='')}@{rest}"
