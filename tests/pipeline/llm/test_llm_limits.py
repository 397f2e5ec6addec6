"""The concurrency cap on LLM calls: in-process, and across processes through a real Redis."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testkit.procs import RedisServer, require_redis_server
from pipeline.errors import PermanentError, TransientError
from pipeline.llm.limits import LimitedLLM, LocalSemaphore, RedisSemaphore
from pipeline.llm.port import LLM, LLMRequest, LLMResponse
from pipeline.prompts.facts import FactsAnswer

REPO = Path(__file__).resolve().parents[3]


class _Gauge(LLM):
    """A fake provider that counts calls in flight and keeps the peak."""

    provider = "gauge"

    def __init__(self, hold_s: float = 0.02, fail: bool = False) -> None:
        self.hold_s, self.fail = hold_s, fail
        self.in_flight = self.peak = self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request):
        with self._lock:
            self.in_flight += 1
            self.calls += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(self.hold_s)
            if self.fail:
                raise PermanentError("HTTP 401")
            return LLMResponse(parsed=FactsAnswer(facts=[]), model=request.model, provider=self.provider)
        finally:
            with self._lock:
                self.in_flight -= 1


REQUEST = LLMRequest(operation="extract_facts", model="m", system="s", prompt="p",
                     response_model=FactsAnswer, timeout_s=5.0)


def _hammer(llm: LLM, threads: int, calls_each: int) -> None:
    def run():
        for _ in range(calls_each):
            llm.complete(REQUEST)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)


def test_the_in_process_cap_never_lets_more_calls_run_than_the_limit():
    inner = _Gauge()
    _hammer(LimitedLLM(inner, LocalSemaphore(3)), threads=8, calls_each=4)
    assert inner.calls == 32 and inner.peak == 3


def test_a_failed_call_gives_its_slot_back():
    slots = LocalSemaphore(1)
    with pytest.raises(PermanentError):
        LimitedLLM(_Gauge(fail=True), slots).complete(REQUEST)
    assert LimitedLLM(_Gauge(), slots, wait_s=0.5).complete(REQUEST).parsed == FactsAnswer(facts=[])


def test_the_in_process_cap_gives_up_with_a_transient_error_when_no_slot_frees():
    slots = LocalSemaphore(1)
    slots.acquire(lease_s=10, wait_s=0)
    with pytest.raises(TransientError, match="busy"):
        LimitedLLM(_Gauge(), slots, wait_s=0.05).complete(REQUEST)


# --- across processes: a real redis-server ------------------------------------------------

@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis-limits"), databases=4)
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    client = redis_server.client(0)
    client.flushdb()
    return client


@pytest.mark.integration
def test_the_redis_cap_holds_across_many_clients_at_once(redis_server, redis_client):
    inner = _Gauge()
    # one Redis connection per limiter, as separate worker processes would have
    limiters = [LimitedLLM(inner, RedisSemaphore(redis_server.client(0), "t:slots", 3)) for _ in range(8)]

    def run(llm):
        for _ in range(4):
            llm.complete(REQUEST)

    workers = [threading.Thread(target=run, args=(llm,)) for llm in limiters]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert inner.calls == 32 and inner.peak == 3
    assert RedisSemaphore(redis_client, "t:slots", 3).holders() == 0


@pytest.mark.integration
def test_a_released_slot_is_free_at_once_and_caps_are_per_key(redis_client):
    sem = RedisSemaphore(redis_client, "t:openai", 2)
    tokens = [sem.try_acquire(30), sem.try_acquire(30)]
    assert all(tokens) and sem.try_acquire(30) is None
    assert RedisSemaphore(redis_client, "t:gemini", 2).try_acquire(30) is not None
    sem.release(tokens[0])
    assert sem.try_acquire(30) is not None


@pytest.mark.integration
def test_waiting_for_a_busy_redis_cap_ends_in_a_transient_error(redis_client):
    sem = RedisSemaphore(redis_client, "t:busy", 1)
    sem.try_acquire(30)
    with pytest.raises(TransientError, match="busy"):
        sem.acquire(lease_s=30, wait_s=0.1)


@pytest.mark.integration
def test_a_slot_freed_in_this_process_goes_at_once_to_a_thread_waiting_for_it(redis_client, monkeypatch):
    import pipeline.llm.limits as limits

    monkeypatch.setattr(limits, "_POLL_MIN_S", 120.0)   # the next poll would be minutes away
    monkeypatch.setattr(limits, "_POLL_MAX_S", 120.0)
    sem = RedisSemaphore(redis_client, "t:wake", 1)
    held = sem.try_acquire(30)
    polled, got = threading.Event(), []
    poll = sem.try_acquire

    def counted(lease_s):
        token = poll(lease_s)
        polled.set()
        return token

    sem.try_acquire = counted
    waiter = threading.Thread(target=lambda: got.append(sem.acquire(lease_s=30, wait_s=300)), daemon=True)
    waiter.start()
    assert polled.wait(30)            # the waiter found the one slot taken
    sem.release(held)
    waiter.join(timeout=30)
    assert got and got[0] is not None  # it took the freed slot without waiting for its next poll


_HOLDER = """
import sys, time, redis
from pipeline.llm.limits import RedisSemaphore
sem = RedisSemaphore(redis.Redis.from_url(sys.argv[1]), "t:crash", 2)
assert sem.try_acquire(3.0) and sem.try_acquire(3.0)
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.integration
def test_slots_of_a_killed_holder_expire_so_no_slot_leaks(redis_server, redis_client):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, redis_server.url(0)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        holder.kill()
        holder.wait(timeout=10)
    sem = RedisSemaphore(redis_client, "t:crash", 2)
    assert sem.try_acquire(30) is None          # the dead process still holds both slots
    token = sem.acquire(lease_s=30, wait_s=15)  # until their lease runs out
    assert token and sem.holders() == 1
