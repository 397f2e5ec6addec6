"""HTTP status -> error tree, and Retry-After parsing, shared by every provider adapter.

Pure functions, so the mapping is one table that the OpenAI and Gemini adapters (and the
OpenAI embedder) agree on.
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


def error_for_status(
    status: int, detail: str, *, where: str, retry_after: float | None = None,
) -> PipelineError:
    """The error to raise for an HTTP error ``status`` from a provider."""
    message = f"{where}: HTTP {status}: {detail}".rstrip(": ")
    if status == 429:
        return RateLimited(message, retry_after=retry_after)
    if status in _TRANSIENT_4XX or status >= 500:
        return TransientError(message, retry_after=retry_after)
    hint = _PERMANENT_HINTS.get(status, "the provider refused the request")
    return PermanentError(f"{where}: HTTP {status} {hint}: {detail}")


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
