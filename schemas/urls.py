"""Connection URLs with credentials: a password either arrives percent-encoded inside the URL,
or on its own (``MEMORY_BROKER_PASSWORD``, ``MEMORY_STORE_PASSWORD``) and is encoded here.

A password pasted raw into a URL breaks it silently: ``@ : / ? #`` end the user part, the host
or the path early (RFC 3986 §3.2.1), so a client connects to the wrong host, port or database,
or fails with an error about something else. Such a URL is refused here with the setting's
name and the character, before any client sees it.
"""

from __future__ import annotations

import re
from urllib.parse import quote

#: characters that may not appear raw in a URL's user or password (RFC 3986 §3.2.1, §2.2)
RESERVED = "@:/?#[]"
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


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
    check_url(setting, url, password_setting)
    if not password:
        return url
    prefix, _, rest = _split(url)
    if not prefix or not rest or rest.startswith("/"):
        raise ValueError(f"{password_setting} is set, but {setting} ({url.partition(':')[0]}) has no host to log in to")
    return with_password(url, password)


def check_url(setting: str, url: str, password_setting: str | None = None) -> str:
    """``url`` unchanged, or ``ValueError`` naming ``setting`` and the first character of its
    user or password that must be percent-encoded."""
    _, userinfo, _ = _split(url)
    if userinfo is None:
        return url
    user, _, password = userinfo.partition(":")
    for part, what in ((user, "user name"), (password, "password")):
        bad = next((ch for ch in part if ch in RESERVED), None)
        if bad is None and _PERCENT.search(part):
            bad = "%"
        if bad is not None:
            instead = f"; or leave it out of the URL and set {password_setting}, which is encoded for you" \
                if password_setting else ""
            raise ValueError(
                f"{setting}: the {what} contains {bad!r}, which must be percent-encoded in a URL "
                f"({quote(bad, safe='')}){instead}"
            )
    return url


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` percent-encoded into its user info (replacing one it had)."""
    prefix, userinfo, rest = _split(url)
    if not prefix:
        raise ValueError(f"not a URL: {url!r}")
    user = (userinfo or "").partition(":")[0]
    return f"{prefix}{user}:{quote(password, safe='')}@{rest}"
