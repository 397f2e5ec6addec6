"""What ``memoryctl`` says when a setting, a service or the input is wrong: one line per
problem, naming the setting, the host or the path, instead of a traceback.

``explain`` returns None for anything else (a programming error keeps its traceback).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from urllib.parse import urlsplit

from pydantic import ValidationError

from pipeline.errors import PipelineError

_FIELD = re.compile(r'field "([^"]+)"')


def explain(exc: BaseException, *, store_url: str | None, broker_url: str | None,
            source_url: str | None = None) -> list[str] | None:
    """One line per problem, or None when ``exc`` is not a user, configuration or
    infrastructure error."""
    if isinstance(exc, PipelineError):
        return [str(exc)]
    if isinstance(exc, ValidationError) and exc.title == "Settings":
        return list(_settings_errors(exc))
    if _is_settings_parse_error(exc):
        field = _FIELD.search(str(exc))
        name = f"MEMORY_{field.group(1).upper()}" if field else "a MEMORY_* variable"
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        return [f"{name} cannot be parsed (a JSON value is expected{cause})"]
    if _is_mongo_error(exc):
        return [_mongo_line(exc, store_url, source_url)]
    if _is_broker_error(exc):
        from ops.stores import describe

        where = describe(broker_url) if broker_url else "the broker"
        return [f"the broker at {where} (MEMORY_BROKER_URL) is unreachable: {_first_line(exc)}"]
    if isinstance(exc, sqlite3.Error):
        from ops.stores import describe

        where = describe(store_url) if store_url else "the SQLite store"
        return [f"SQLite store {where} (MEMORY_STORE_URL): {exc}"]
    if isinstance(exc, OSError) and exc.filename:
        return [f"{exc.filename}: {exc.strerror or exc}"]
    return None


def _settings_errors(exc: ValidationError) -> Iterable[str]:
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        if error["loc"]:
            name = "MEMORY_" + "_".join(str(p) for p in error["loc"]).upper()
            got = _shown_input(name, error.get("input"))
            yield f"{name}: {message.removeprefix(f'{name}: ')}" + (f" (got {got})" if got else "")
        else:  # a cross-field rule: its message names the settings
            yield message


def _shown_input(name: str, value: object) -> str | None:
    """The value of a refused setting as an error may show it: never a secret (a password or
    key setting shows nothing, a URL its password masked)."""
    if any(word in name for word in ("PASSWORD", "KEY", "SECRET", "TOKEN")):
        return None
    if isinstance(value, str) and "://" in value:
        from schemas.urls import mask

        return repr(mask(value))
    return repr(value)


def _is_settings_parse_error(exc: BaseException) -> bool:
    from pydantic_settings import SettingsError

    return isinstance(exc, SettingsError)


def _is_mongo_error(exc: BaseException) -> bool:
    try:
        from pymongo.errors import PyMongoError
    except ImportError:
        return False
    return isinstance(exc, PyMongoError)


def _mongo_line(exc: BaseException, store_url: str | None, source_url: str | None) -> str:
    from pymongo.errors import ConnectionFailure

    from ops.stores import describe

    text = _first_line(exc)
    candidates = [("--source-url", source_url), ("MEMORY_STORE_URL", store_url)]
    named = [(option, url) for option, url in candidates if url and url.startswith("mongodb")]
    option, url = next(
        ((o, u) for o, u in named if _hosts(u) and any(h in text for h in _hosts(u))),
        named[-1] if named else ("MEMORY_STORE_URL", store_url),
    )
    where = describe(url) if url else "MongoDB"
    if isinstance(exc, ConnectionFailure):
        return f"MongoDB at {where} ({option}) is unreachable: {text}"
    return f"MongoDB at {where} ({option}): {text}"


def _hosts(url: str) -> list[str]:
    netloc = urlsplit(url).netloc.rsplit("@", 1)[-1]
    return [h for h in netloc.split(",") if h]


def _is_broker_error(exc: BaseException) -> bool:
    from kombu.exceptions import OperationalError

    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:
        return isinstance(exc, OperationalError)
    return isinstance(exc, (OperationalError, RedisConnectionError, RedisTimeoutError))


def _first_line(exc: BaseException) -> str:
    # pymongo appends the whole topology description; the first clause names host and cause
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for cut in (" (configured timeouts", ", Timeout:"):
        text = text.split(cut, 1)[0]
    return text
