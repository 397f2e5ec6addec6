"""HTTP status -> error tree, and Retry-After parsing, shared by every provider adapter.

Pure functions, so the mapping is one table that the OpenAI and Gemini adapters (and the
embedders) agree on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from pipeline.errors import PermanentError, PipelineError, RateLimited, TransientError

#: statuses worth asking again: request timeout, conflict, rate limit and every 5xx
_TRANSIENT_4XX = {408, 409, 429}

_PERMANENT_HINTS = {
    400: "bad request (the request or its schema was refused)",
    401: "authentication failed: check the API key",
    403: "permission denied: the key may not use this model or project",
    404: "not found: check the model name and base URL",
    422: "unprocessable request",
}

# error codes that turn a status's usual meaning around:
# - OpenAI answers 429 with code "insufficient_quota" when the account has no credit left; no
#   retry helps (https://platform.openai.com/docs/guides/error-codes/api-errors);
# - Gemini answers 400 INVALID_ARGUMENT with ErrorInfo reason "API_KEY_INVALID" for a bad key
#   (https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes).
_CODE_HINTS = {
    "insufficient_quota": "billing: the account has no quota left; add credit or raise the spending limit",
    "API_KEY_INVALID": "authentication failed: the API key is not valid",
}


def error_for_status(
    status: int | None, detail: str, *, where: str, retry_after: float | None = None, code: str | None = None,
) -> PipelineError:
    """The error to raise for an HTTP error ``status`` from a provider (``code``: the error
    body's code or reason, when it has one)."""
    if not status:
        # an error object without a status is not an HTTP answer: never report "HTTP 0"
        return TransientError(f"{where}: the provider failed without a status code: {detail}".rstrip(": "))
    if code in _CODE_HINTS:
        return PermanentError(f"{where}: HTTP {status} {_CODE_HINTS[code]} ({code}): {detail}")
    message = f"{where}: HTTP {status}: {detail}".rstrip(": ")
    if status == 429:
        return RateLimited(message, retry_after=retry_after)
    if status in _TRANSIENT_4XX or status >= 500:
        return TransientError(message, retry_after=retry_after)
    hint = _PERMANENT_HINTS.get(status, "the provider refused the request")
    return PermanentError(f"{where}: HTTP {status} {hint}: {detail}")


def transport_error(where: str, exc: BaseException, timeout_s: float | None = None) -> TransientError:
    """A timeout or a failed connection, saying which (never as an HTTP status)."""
    cause = exc.__cause__ or exc.__context__ or exc
    kind = type(cause).__name__
    if "Timeout" in kind or "Timeout" in type(exc).__name__:
        within = f" within {timeout_s:g}s" if timeout_s else ""
        return TransientError(f"{where}: no answer{within}: request timed out ({kind})")
    return TransientError(f"{where}: connection failed ({kind}: {cause})")


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
