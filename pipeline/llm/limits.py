"""A cap on concurrent LLM calls per provider, so a burst of formations is not a storm of 429s.

Across every worker the cap is a Redis semaphore: a sorted set of holders scored by the
Redis-clock time their slot expires. Acquiring runs one Lua script (drop expired holders;
take a slot if fewer than ``limit`` remain), so it is atomic on the server. A slot outlives
its call's timeout by a margin and then expires: a worker that crashed mid-call never leaks
it. Within one process (no Redis broker) a ``threading.BoundedSemaphore`` does the same.

A waiter polls Redis with a backoff (5 ms doubling to 250 ms), and a slot released by a thread
of its own process wakes it at once: otherwise a freed slot sat idle for up to a backoff step,
and at 500 ms calls the formation worker's 32 threads used about 10 of 16 slots
(``python -m bench.formation --llm-latency-ms 500``, docs/benchmarks.md).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from pipeline.errors import TransientError
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from schemas.settings import Settings

T = TypeVar("T", bound=BaseModel)

# KEYS[1] holders zset; ARGV: token, limit, lease ms. Redis time, so worker clocks do not matter.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
  return 1
end
return 0
"""

_LEASE_MARGIN_S = 15.0   # a slot outlives its call's timeout by this much
_POLL_MIN_S = 0.005
_POLL_MAX_S = 0.25


class Slots(Protocol):
    def acquire(self, lease_s: float, wait_s: float) -> Any: ...
    def release(self, token: Any) -> None: ...


class RedisSemaphore:
    """At most ``limit`` holders of ``key`` at once, over every process that shares the Redis."""

    def __init__(self, redis_client: Any, key: str, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"semaphore {key}: limit must be at least 1, got {limit}")
        self.redis = redis_client
        self.key = key
        self.limit = limit
        self._acquire = redis_client.register_script(_ACQUIRE)
        self._freed = threading.Condition()
        self._releases = 0     # slots released in this process so far: a waiter's wake-up call

    def try_acquire(self, lease_s: float) -> str | None:
        """A token if a slot was free, else None. The slot expires after ``lease_s``."""
        token = uuid.uuid4().hex
        got = self._acquire(keys=[self.key], args=[token, self.limit, max(1, int(lease_s * 1000))])
        return token if int(got) == 1 else None

    def acquire(self, lease_s: float, wait_s: float) -> str:
        """Wait up to ``wait_s`` for a slot; ``TransientError`` if none frees up (retried later)."""
        deadline = time.monotonic() + wait_s
        pause = _POLL_MIN_S
        while True:
            with self._freed:
                seen = self._releases
            token = self.try_acquire(lease_s)
            if token is not None:
                return token
            left = deadline - time.monotonic()
            if left <= 0:
                raise TransientError(f"all {self.limit} LLM slots of {self.key} stayed busy for {wait_s:g}s")
            with self._freed:
                if self._releases == seen:   # nothing freed here since the poll: wait for it, or poll again
                    self._freed.wait(min(left, random.uniform(pause / 2, pause)))
            pause = min(pause * 2, _POLL_MAX_S)

    def release(self, token: str) -> None:
        self.redis.zrem(self.key, token)
        with self._freed:
            self._releases += 1
            self._freed.notify()

    def holders(self) -> int:
        """Live holders now (expired ones are not counted)."""
        now_s, now_us = self.redis.time()
        return int(self.redis.zcount(self.key, f"({now_s * 1000 + now_us // 1000}", "+inf"))


class LocalSemaphore:
    """The in-process cap, when there is no shared Redis."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._sem = threading.BoundedSemaphore(limit)

    def acquire(self, lease_s: float, wait_s: float) -> None:
        if not self._sem.acquire(timeout=wait_s):
            raise TransientError(f"all {self.limit} LLM slots stayed busy for {wait_s:g}s")

    def release(self, token: None) -> None:
        self._sem.release()


class LimitedLLM(LLM):
    """Wraps any LLM so that each call holds one slot of ``slots`` for its duration."""

    def __init__(self, inner: LLM, slots: Slots, wait_s: float = 60.0) -> None:
        self.inner = inner
        self.slots = slots
        self.wait_s = wait_s
        self.provider = inner.provider

    def timeout_for(self, request: LLMRequest[T]) -> float:
        return self.inner.timeout_for(request)

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        token = self.slots.acquire(self.inner.timeout_for(request) + _LEASE_MARGIN_S, self.wait_s)
        try:
            return self.inner.complete(request)
        finally:
            self.slots.release(token)


def limit_concurrency(llm: LLM, settings: Settings, *, redis_client: Any = None) -> LLM:
    """Cap ``llm`` by ``settings.llm_max_concurrency`` (0 means no cap): in Redis when the
    caller hands a Redis client (the workers hand one on the broker, so the cap holds across
    every worker), else within this process. ``pipeline`` builds no client of its own."""
    limit = settings.llm_max_concurrency
    if limit <= 0:
        return llm
    if redis_client is not None:
        key = f"{settings.collection_prefix}llm_slots:{llm.provider}"
        return LimitedLLM(llm, RedisSemaphore(redis_client, key, limit), wait_s=settings.llm_slot_wait_s)
    return LimitedLLM(llm, LocalSemaphore(limit), wait_s=settings.llm_slot_wait_s)
