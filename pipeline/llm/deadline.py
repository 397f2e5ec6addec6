"""A hard wall-clock bound on one provider call, on every worker pool.

The SDKs' timeouts are httpx timeouts: connect, write, pool, and a *read* timeout that bounds
the wait for each chunk of the answer, not the answer as a whole
(https://www.python-httpx.org/advanced/timeouts/). A server that trickles its answer, a byte
now and then, never trips them, and Celery's ``task_time_limit`` is not enforced on the threads
pool the LLM workers run (celery/celery#9203). So every network call to a provider runs in a
helper thread and the caller waits for it at most ``timeout + GRACE_S``: the SDK's own timeout
error wins when it fires, and a call still running past the bound is abandoned (its thread
ends with the connection, its answer is dropped) and the caller gets a ``TransientError``.

``call_bound_s`` is the arithmetic the settings check against the leases
(``Settings._calls_fit_leases``): how long one call may hold a stage, slot wait included.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

from pipeline.errors import TransientError
from schemas.settings import PROVIDER_CALL_GRACE_S as GRACE_S

T = TypeVar("T")


class DeadlineExceeded(TransientError):
    """A provider call outlived its hard wall-clock bound and was abandoned."""


def within(timeout_s: float, call: Callable[[], T], *, where: str) -> T:
    """``call()``, or ``DeadlineExceeded`` once ``timeout_s + GRACE_S`` seconds have passed.

    The call runs in a daemon thread with the caller's context (the trace span), so an
    abandoned call never keeps a worker from exiting. Its own exceptions are raised as they are.
    """
    outcome: dict[str, object] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["value"] = context.run(call)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"provider call: {where}", daemon=True).start()
    if not done.wait(timeout_s + GRACE_S):
        raise DeadlineExceeded(f"{where}: no whole answer within {timeout_s:g}s; the call was abandoned "
                               "(the server kept the connection open)")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def call_bound_s(timeout_s: float, slot_wait_s: float = 0.0) -> float:
    """The longest one provider call can hold its caller: waiting for a concurrency slot, then
    the call up to its hard bound."""
    return slot_wait_s + timeout_s + GRACE_S
