"""Provider rate limits, requests and tokens per minute per provider and model, shared by every
worker (design §8).

The rule is GCRA (the generic cell rate algorithm) with no burst: each limit keeps a
theoretical arrival time (TAT). A call may go when the TAT is not in the future, and moves it
on by one emission interval per unit (60 s / rpm per request, 60 s / tpm per token). So no
60-second window ever holds more than the limit's requests, and none more than its tokens plus
one call's. A provider's 429 pushes both TATs to the end of its ``Retry-After``: every worker
holds off until then, not only the one that was told.

``gcra`` below is the decision; ``LocalRates`` applies it in one process; ``rates_redis``
applies the same decision in one Lua script on the Redis every worker shares. A call whose wait
is short waits in place (``MEMORY_LLM_RATE_WAIT_INLINE_S``, counted in the lease arithmetic);
a longer wait raises ``Throttled`` with the wait as its ``retry_after``, and the task is sent
again with that countdown (``workers.base``): no worker thread sleeps out a minute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydantic import BaseModel

from pipeline.errors import RateLimited, Throttled
from pipeline.llm.port import LLM, LLMRequest, LLMResponse

T = TypeVar("T", bound=BaseModel)

#: a 429 without Retry-After holds every worker off this long
DEFAULT_HOLD_S = 5.0
#: turns are this much wider apart than 60 s / rpm: a call reaches the provider a little after
#: its turn, by a delay that varies, and two calls a minute apart whose delays differ by the
#: turn's gap would otherwise both fall in one minute of the provider's count (rpm + 1 calls;
#: measured by ``bench.throttle``)
SPACING = 1.02


@dataclass(frozen=True)
class RateLimit:
    rpm: int = 0          # requests per minute; 0: not limited
    tpm: int = 0          # tokens (input + output) per minute; 0: not limited

    @property
    def request_interval_ms(self) -> float:
        return 60_000.0 * SPACING / self.rpm if self.rpm else 0.0

    @property
    def token_interval_ms(self) -> float:
        return 60_000.0 * SPACING / self.tpm if self.tpm else 0.0


def gcra(tat_ms: float | None, now_ms: float, interval_ms: float, cost: float) -> tuple[float, float]:
    """(wait in ms, the new TAT) for ``cost`` units now: a wait above 0 takes nothing (the TAT
    stays); else the TAT moves on by ``interval_ms * cost`` from now or from where it was."""
    tat = max(tat_ms or now_ms, now_ms)
    if tat > now_ms:
        return tat - now_ms, tat
    return 0.0, tat + interval_ms * cost


def limit_for(limits: Mapping[str, RateLimit], provider: str, model: str) -> RateLimit | None:
    """The limit of ``provider:model``, else of ``provider`` (every model of it), else None."""
    return limits.get(f"{provider}:{model}") or limits.get(provider)


def estimate_tokens(request: LLMRequest) -> int:
    """The input tokens of a request, estimated before the call (about four characters a
    token); the answer's real count is charged after it (``Rates.debit``)."""
    return max(1, (len(request.system) + len(request.prompt)) // 4)


class Rates(Protocol):
    """Where the limits' TATs live: this process (``LocalRates``) or a shared Redis."""

    def take(self, key: str, limit: RateLimit, tokens: int) -> float:
        """Take one request and ``tokens`` now: 0 when taken, else the seconds to wait."""

    def debit(self, key: str, limit: RateLimit, tokens: int) -> None:
        """Charge ``tokens`` more, unconditionally (what the answer used beyond the estimate)."""

    def hold(self, key: str, limit: RateLimit, seconds: float) -> None:
        """The provider said 429: nothing goes for ``seconds``."""


class LocalRates:
    """The limits within one process (no shared Redis): the same ``gcra`` under a lock."""

    def __init__(self, clock=time.monotonic) -> None:
        self._tat: dict[str, float] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def _now(self) -> float:
        return self._clock() * 1000.0

    def take(self, key: str, limit: RateLimit, tokens: int) -> float:
        with self._lock:
            now = self._now()
            req = gcra(self._tat.get(key + ":req"), now, limit.request_interval_ms, 1)
            tok = gcra(self._tat.get(key + ":tok"), now, limit.token_interval_ms, tokens)
            wait = max(req[0] if limit.rpm else 0.0, tok[0] if limit.tpm else 0.0)
            if wait > 0:
                return wait / 1000.0
            self._tat[key + ":req"], self._tat[key + ":tok"] = req[1], tok[1]
            return 0.0

    def debit(self, key: str, limit: RateLimit, tokens: int) -> None:
        with self._lock:
            now = self._now()
            self._tat[key + ":tok"] = max(self._tat.get(key + ":tok", now), now) + limit.token_interval_ms * tokens

    def hold(self, key: str, limit: RateLimit, seconds: float) -> None:
        with self._lock:
            until = self._now() + seconds * 1000.0
            for part in (":req", ":tok"):
                self._tat[key + part] = max(self._tat.get(key + part, 0.0), until)


class RateLimitedLLM(LLM):
    """Wraps an LLM so that each call to a limited model first takes its turn in ``rates``."""

    def __init__(self, inner: LLM, rates: Rates, limits: Mapping[str, RateLimit], *, wait_inline_s: float) -> None:
        self.inner = inner
        self.rates = rates
        self.limits = dict(limits)
        self.wait_inline_s = wait_inline_s
        self.provider = inner.provider

    def timeout_for(self, request: LLMRequest[T]) -> float:
        return self.inner.timeout_for(request)

    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        limit = limit_for(self.limits, self.provider, request.model)
        if limit is None:
            return self.inner.complete(request)
        key = f"{self.provider}:{request.model}"
        estimate = estimate_tokens(request)
        self._take_turn(key, limit, estimate, request.model)
        try:
            response = self.inner.complete(request)
        except RateLimited as exc:
            self.rates.hold(key, limit, exc.retry_after or DEFAULT_HOLD_S)
            raise
        extra = response.input_tokens + response.output_tokens - estimate
        if limit.tpm and extra > 0:
            self.rates.debit(key, limit, extra)
        return response

    def _take_turn(self, key: str, limit: RateLimit, tokens: int, model: str) -> None:
        """Wait in place while the wait stays within ``wait_inline_s`` in all; past it,
        ``Throttled`` carries the wait (the task is sent again with it as its countdown)."""
        budget = time.monotonic() + self.wait_inline_s
        while True:
            wait = self.rates.take(key, limit, tokens)
            if wait <= 0:
                return
            if time.monotonic() + wait > budget:
                raise Throttled(f"{self.provider} {model}: the shared rate limit (rpm {limit.rpm or '-'}, "
                                f"tpm {limit.tpm or '-'}) has no turn for {wait:.1f}s; sent again then",
                                retry_after=wait)
            time.sleep(wait)


def limits_of(settings) -> dict[str, RateLimit]:
    """``MEMORY_LLM_RATE_LIMITS`` as ``RateLimit`` values."""
    return {name: RateLimit(rpm=v.get("rpm", 0), tpm=v.get("tpm", 0)) for name, v in settings.llm_rate_limits.items()}


def limit_rate(llm: LLM, settings, *, redis_client=None) -> LLM:
    """Wrap ``llm`` in the rate limits of ``settings`` that name its provider (none: ``llm``
    itself): shared through ``redis_client`` when given (the workers give the broker's), else
    within this process."""
    limits = {k: v for k, v in limits_of(settings).items() if k.split(":")[0] == llm.provider}
    if not limits:
        return llm
    if redis_client is not None:
        from pipeline.llm.rates_redis import RedisRates

        rates: Rates = RedisRates(redis_client, settings.collection_prefix)
    else:
        rates = LocalRates()
    return RateLimitedLLM(llm, rates, limits, wait_inline_s=settings.llm_rate_wait_inline_s)
