"""The shared side of the provider rate limits (``pipeline.llm.rates``): every limit's TATs in
the Redis every worker reaches, moved by one Lua script, atomic on the server.

The script declares every key it touches (design §12): ``KEYS[1]`` the request TAT,
``KEYS[2]`` the token TAT, ``KEYS[3]`` the counters hash that ``memoryctl status`` reads
(deferrals and 429 holds per provider and model). Times are the Redis server's (``TIME``), so
the workers' clocks do not matter. A TAT key expires a minute after its time has passed: an
idle limit leaves nothing behind. The script answers strings, since Redis cuts a Lua number
to an integer.
"""

from __future__ import annotations

from typing import Any

from pipeline.llm.rates import RateLimit

# ARGV: mode (take | debit | hold), request interval ms, token interval ms, tokens, hold ms, field
SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local mode, req_iv, tok_iv = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, hold_ms, field = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local function tat(key)
  local v = redis.call('GET', key)
  if v then return math.max(tonumber(v), now) end
  return now
end
local function put(key, value)
  redis.call('SET', key, string.format('%.3f', value), 'PX', math.ceil(value - now) + 60000)
end
if mode == 'hold' then
  local until_ms = now + hold_ms
  if tat(KEYS[1]) < until_ms then put(KEYS[1], until_ms) end
  if tat(KEYS[2]) < until_ms then put(KEYS[2], until_ms) end
  redis.call('HINCRBY', KEYS[3], field .. '|holds', 1)
  return '0'
end
local req_tat, tok_tat = tat(KEYS[1]), tat(KEYS[2])
if mode == 'debit' then
  if tok_iv > 0 then put(KEYS[2], tok_tat + tok_iv * tokens) end
  return '0'
end
local wait = 0
if req_iv > 0 then wait = math.max(wait, req_tat - now) end
if tok_iv > 0 then wait = math.max(wait, tok_tat - now) end
if wait > 0 then
  redis.call('HINCRBY', KEYS[3], field .. '|deferred', 1)
  return string.format('%.3f', wait)
end
if req_iv > 0 then put(KEYS[1], req_tat + req_iv) end
if tok_iv > 0 then put(KEYS[2], tok_tat + tok_iv * tokens) end
return '0'
"""


class RedisRates:
    """``pipeline.llm.rates.Rates`` on a shared Redis (a client the caller builds)."""

    def __init__(self, redis_client: Any, prefix: str) -> None:
        self.redis = redis_client
        self.prefix = prefix
        self.counters = f"{prefix}llm_rate:counters"
        self._script = redis_client.register_script(SCRIPT)

    def _call(self, mode: str, key: str, limit: RateLimit, tokens: int = 0, hold_s: float = 0.0) -> float:
        keys = [f"{self.prefix}llm_rate:{key}:req", f"{self.prefix}llm_rate:{key}:tok", self.counters]
        answer = self._script(keys=keys, args=[mode, limit.request_interval_ms, limit.token_interval_ms,
                                               int(tokens), round(hold_s * 1000.0, 3), key])
        return float(answer) / 1000.0

    def take(self, key: str, limit: RateLimit, tokens: int) -> float:
        return self._call("take", key, limit, tokens)

    def debit(self, key: str, limit: RateLimit, tokens: int) -> None:
        self._call("debit", key, limit, tokens)

    def hold(self, key: str, limit: RateLimit, seconds: float) -> None:
        self._call("hold", key, limit, hold_s=seconds)

    def status(self, keys: list[str]) -> dict[str, dict]:
        """Per limited ``provider:model``: the seconds until its next turn (0: free now), and
        the calls deferred and the 429 holds counted so far."""
        now_s, now_us = self.redis.time()
        now = now_s * 1000 + now_us / 1000
        counters = {k.decode() if isinstance(k, bytes) else k: int(v) for k, v in self.redis.hgetall(self.counters).items()}
        out = {}
        for key in keys:
            tats = [float(v) for v in self.redis.mget(f"{self.prefix}llm_rate:{key}:req",
                                                       f"{self.prefix}llm_rate:{key}:tok") if v is not None]
            out[key] = {"next_turn_s": round(max([0.0, *((t - now) / 1000 for t in tats)]), 3),
                        "deferred": counters.get(f"{key}|deferred", 0), "holds": counters.get(f"{key}|holds", 0)}
        return out


def limits_status(settings, redis_client: Any) -> dict[str, dict]:
    """Per limit of ``MEMORY_LLM_RATE_LIMITS``: its rpm and tpm, and what the shared counters
    say (``RedisRates.status``: the seconds until its next turn, calls deferred, 429 holds);
    with no shared Redis, the limits alone. {} when none is set. Per limit ``provider:model``;
    a provider-wide limit counts under each of its models, so it shows the limits alone."""
    limits = settings.llm_rate_limits
    if not limits:
        return {}
    shared = RedisRates(redis_client, settings.collection_prefix).status(list(limits)) if redis_client else {}
    return {name: {"rpm": v.get("rpm", 0), "tpm": v.get("tpm", 0), **shared.get(name, {})}
            for name, v in limits.items()}
