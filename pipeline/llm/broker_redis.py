"""The broker's Redis as a redis-py client, where the shared provider limits live
(``pipeline.llm.rates_redis``): the workers' limiter writes there, and the status pages read it."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlsplit

from schemas.settings import Settings


def broker_redis(settings: Settings, timeout_s: float = 5.0):
    """A redis-py client of the broker's Redis (the master a Sentinel names, for
    ``sentinel://``), or None when the broker is not Redis.

    The same server kombu's transports reach (``workers.transport``): for ``rediss://`` the
    URL's ``ssl_*`` query, else a verified certificate; for ``sentinel://`` the first URL's
    user, password, database and ``ssl_*`` query, every URL's host as a sentinel, and
    ``MEMORY_BROKER_SENTINEL_MASTER``."""
    import redis

    url = settings.broker_url
    timeouts = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss"):
        return redis.Redis.from_url(url, **timeouts)
    if scheme != "sentinel":
        return None
    from redis.sentinel import Sentinel

    parts = [urlsplit(u) for u in url.split(";")]
    first = parts[0]
    master = {**timeouts, "db": int(first.path.strip("/") or 0)}
    if first.username:
        master["username"] = unquote(first.username)
    if first.password:
        master["password"] = unquote(first.password)
    query = dict(parse_qsl(first.query))
    if any(key.startswith("ssl_") for key in query):
        master["ssl"] = True
        master.update({k: (v.lower() != "false" if k == "ssl_check_hostname" else v)
                       for k, v in query.items() if k.startswith("ssl_")})
    sentinels = [(p.hostname or "127.0.0.1", p.port or 26379) for p in parts]
    return Sentinel(sentinels, sentinel_kwargs=timeouts).master_for(settings.broker_sentinel_master, **master)
