"""Per-credential rate limits kept in Redis (they hold across uvicorn workers and hosts), and
the request size limit.

The rate limit is a fixed one-minute window per credential id: one Lua script increments the
window's counter and sets its expiry on first use, atomically (the key it touches is declared
in ``KEYS``). Over the limit: 429 with ``Retry-After``. Redis unreachable: 503, never an
unlimited pass.
"""

from __future__ import annotations

import re

import time

from api.errors import ApiError

_WINDOW_S = 60
_SCRIPT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
"""
KEY_PREFIX = "memory:api:rate:"
# the schemes redis-py's ``Redis.from_url`` takes (redis/connection.py, ``parse_url``)
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class RateLimited(ApiError):
    status = 429

    def __init__(self, limit: int, retry_after: int) -> None:
        super().__init__("rate limited", "header Authorization",
                         f"more than {limit} requests in a minute with this credential",
                         headers={"Retry-After": str(retry_after)})


def rate_limit_redis(api_redis_url: str | None, broker_url: str, limit: int) -> str | None:
    """The Redis URL the rate limits are kept in (``MEMORY_API_REDIS_URL``, else the broker's),
    None when the limit is off. A URL that is not Redis's (the demo's ``memory://`` broker, an
    AMQP one) is refused with the variables to set, not found by the first request."""
    if not limit:
        return None
    url, name = (api_redis_url, "MEMORY_API_REDIS_URL") if api_redis_url else (broker_url, "MEMORY_BROKER_URL")
    if not url.startswith(REDIS_SCHEMES):
        from pipeline.errors import ConfigurationError

        scheme = url.split("://", 1)[0] + "://" if "://" in url else repr(url)
        raise ConfigurationError(
            f"the API's rate limit (MEMORY_API_RATE_LIMIT_PER_MINUTE={limit}) is counted in Redis, and {name} "
            f"is a {scheme} URL: set MEMORY_API_REDIS_URL to a redis://, rediss:// or unix:// URL, "
            "or MEMORY_API_RATE_LIMIT_PER_MINUTE=0 to serve without a rate limit")
    return url


class RateLimiter:
    """``limit`` requests per minute per credential id; ``limit`` 0: no limit, no Redis."""

    def __init__(self, redis_url: str | None, limit: int, *, clock=time.time) -> None:
        self.limit = limit
        self._clock = clock
        self._redis = None
        self._script = None
        if limit:
            import redis

            self._redis = redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
            self._script = self._redis.register_script(_SCRIPT)

    def check(self, credential_id: str) -> None:
        if not self.limit:
            return
        import redis

        window = int(self._clock() // _WINDOW_S)
        try:
            count, ttl_ms = self._script(keys=[f"{KEY_PREFIX}{credential_id}:{window}"], args=[_WINDOW_S * 1000 + 1000])
        except redis.RedisError as exc:
            raise ApiError("unavailable", "server", f"the rate-limit store is unreachable ({type(exc).__name__})",
                           status=503, headers={"Retry-After": "1"}) from None
        if int(count) > self.limit:
            raise RateLimited(self.limit, max(1, int(ttl_ms) // 1000 if int(ttl_ms) > 0 else _WINDOW_S))

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()


#: the routes whose body is read as a stream, under their own limit (``import_max_bytes``)
STREAMED = re.compile(r"^/v1/agents/[^/]+/import/?$")


def import_limit(api_settings) -> int:
    """The largest body an import reads (``MEMORY_API_IMPORT_MAX_BYTES``)."""
    return max(api_settings.import_max_bytes, api_settings.max_body_bytes)


class BodyLimit:
    """ASGI middleware: a request body above ``max_bytes`` gets 413, whether it declares its
    length or streams it in chunks. A body without a declared length is read here, up to the
    limit, before the app sees it: nothing past the limit is read."""

    def __init__(self, app, max_bytes: int, streamed_max_bytes: int | None = None) -> None:
        self.app, self.max_bytes = app, max_bytes
        self.streamed_max_bytes = streamed_max_bytes or max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if STREAMED.match(scope.get("path", "")):
            # read by the route as it streams, which counts it against the same limit
            if declared is not None and (not declared.isdigit() or int(declared) > self.streamed_max_bytes):
                return await self._refuse(send, self.streamed_max_bytes)
            return await self.app(scope, receive, send)
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.max_bytes:
                return await self._refuse(send, self.max_bytes)
            return await self.app(scope, receive, send)
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return await self._refuse(send, self.max_bytes)
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send, limit: int) -> None:
        from api.errors import problem

        response = problem(413, "request too large", "body", f"more than {limit} bytes")
        await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
