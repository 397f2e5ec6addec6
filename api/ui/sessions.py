"""Log-in for the inspector: a one-time link, or a credential typed into the log-in form,
exchanged for a session cookie; and the CSRF token of every mutating form.

The cookie holds a random session id only (HttpOnly, SameSite=Strict, Secure over https);
the credential stays in this process, and every request authenticates it again through
``api.auth.authenticate``, so a revoked key or an expired user token ends the session at
once. A one-time code is consumed by its first use and lapses after ``LINK_TTL_S``: a link
that leaked into a browser history or an access log opens nothing.

Sessions live in the serving process (``memoryctl ui`` runs one). CSRF is a synchronizer
token: a random value per session, put in each form, compared in constant time on POST. The
log-in form, which comes before any session, carries a random token that its ``SameSite=Strict``
cookie holds too (a double submit), and every POST, the log-in's included, must come from
this site (``api.ui.web.check_origin``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass

COOKIE = "memory_ui"
#: the log-in form's CSRF token, before any session exists (path /ui/login only)
LOGIN_COOKIE = "memory_ui_login"
LINK_TTL_S = 600.0
SESSION_TTL_S = 8 * 3600.0
MAX_SESSIONS = 10_000


@dataclass
class UiSession:
    credential: str
    csrf: str
    expires_at: float


def _digest(value: str) -> str:
    # the tables are keyed by digests: a dump of this process's memory names no live cookie
    return hashlib.sha256(value.encode()).hexdigest()


class LoginSessions:
    """One-time codes and signed-in sessions of one process (thread-safe)."""

    def __init__(self, *, clock=time.monotonic) -> None:
        self._clock = clock
        self._codes: dict[str, tuple[str, float]] = {}
        self._sessions: dict[str, UiSession] = {}
        self._lock = threading.Lock()

    def issue_code(self, credential: str, ttl_s: float = LINK_TTL_S) -> str:
        """A code that ``redeem`` exchanges once for a session over ``credential``."""
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._codes[_digest(code)] = (credential, self._clock() + ttl_s)
        return code

    def redeem(self, code: str) -> str | None:
        """The credential behind ``code``, or None (unknown, used or lapsed); the code is gone after."""
        with self._lock:
            found = self._codes.pop(_digest(code), None)
        if found is None or found[1] < self._clock():
            return None
        return found[0]

    def open(self, credential: str) -> tuple[str, UiSession]:
        """A new session over ``credential``: (cookie value, session)."""
        sid = secrets.token_urlsafe(32)
        session = UiSession(credential, secrets.token_urlsafe(32), self._clock() + SESSION_TTL_S)
        with self._lock:
            self._prune()
            self._sessions[_digest(sid)] = session
        return sid, session

    def get(self, sid: str | None) -> UiSession | None:
        if not sid:
            return None
        with self._lock:
            session = self._sessions.get(_digest(sid))
            if session is not None and session.expires_at < self._clock():
                del self._sessions[_digest(sid)]
                return None
        return session

    def close(self, sid: str | None) -> None:
        if sid:
            with self._lock:
                self._sessions.pop(_digest(sid), None)

    def _prune(self) -> None:
        now = self._clock()
        for key in [k for k, s in self._sessions.items() if s.expires_at < now]:
            del self._sessions[key]
        for key in [k for k, (_, exp) in self._codes.items() if exp < now]:
            del self._codes[key]
        # a flood of log-ins cannot grow the table without bound: the oldest session goes first
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))


def csrf_matches(session: UiSession, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(session.csrf, sent)


def new_login_csrf() -> str:
    return secrets.token_urlsafe(32)


def login_csrf_matches(cookie: str | None, sent: str | None) -> bool:
    """The log-in form's token is the one its cookie holds (a double submit: a page on another
    site can neither read nor set this site's strict cookie)."""
    return bool(cookie) and bool(sent) and hmac.compare_digest(cookie, sent)
