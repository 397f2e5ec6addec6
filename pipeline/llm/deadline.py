"""A hard wall-clock bound on one provider call, on every worker pool.

The SDKs' timeouts are httpx timeouts: connect, write, pool, and a *read* timeout that bounds
the wait for each chunk of the answer, not the answer as a whole
(https://www.python-httpx.org/advanced/timeouts/). A server that trickles its answer, a byte
now and then, never trips them, and Celery's ``task_time_limit`` is not enforced on the threads
pool the LLM workers run (celery/celery#9203). So every network call to a provider runs in a
helper thread and the caller waits for it at most ``timeout + GRACE_S``: the SDK's own timeout
error wins when it fires, and a call still running past the bound is abandoned (its answer is
dropped) and the caller gets a ``TransientError``. The clients the adapters build read their
answers through ``bounded_transport``, which stops reading a body past the same deadline, so
an abandoned call's thread and connection end then too instead of following the trickle.

``Settings._calls_fit_leases`` keeps one call's bound (slot wait + timeout + grace) below the
leases that are renewed before each call.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pipeline.errors import TransientError
from schemas.settings import PROVIDER_CALL_GRACE_S as GRACE_S

T = TypeVar("T")


# the monotonic time the provider call running in this context must end by (set by ``within``)
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("provider_call_deadline", default=None)


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
    started = time.monotonic()
    # the clients stop reading halfway through the grace; the caller stops waiting at its end
    cut_at, ends_at = started + timeout_s + GRACE_S / 2, started + timeout_s + GRACE_S

    def bounded() -> T:
        _DEADLINE.set(cut_at)
        return call()

    def run() -> None:
        try:
            outcome["value"] = context.run(bounded)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"provider call: {where}", daemon=True).start()
    overdue = DeadlineExceeded(f"{where}: no whole answer within {timeout_s:g}s; the call was abandoned "
                               "(the server kept the connection open)")
    if not done.wait(max(0.0, ends_at - time.monotonic())):
        raise overdue
    if "error" in outcome:
        error = outcome["error"]
        if time.monotonic() >= cut_at and "Timeout" in type(error).__name__:
            raise overdue from error  # the answer was cut at the deadline: the same outcome, said once
        raise error  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


_TRANSPORTS: dict[str, type] = {}


def bounded_transport(httpx_module: Any, **transport_options: Any) -> Any:
    """An ``httpx_module.HTTPTransport`` (httpx, or the httpx2 fork the openai SDK uses) whose
    answers stop being read past the deadline of the ``within`` call they belong to: the body
    then raises the module's ``ReadTimeout`` and its connection is closed."""
    name = httpx_module.__name__
    if name not in _TRANSPORTS:
        _TRANSPORTS[name] = _transport_class(httpx_module)
    return _TRANSPORTS[name](httpx_module.HTTPTransport(**transport_options))


def _transport_class(httpx_module: Any) -> type:
    class _BoundedStream(httpx_module.SyncByteStream):
        def __init__(self, inner: Any, ends_at: float, request: Any) -> None:
            self.inner, self.ends_at, self.request = inner, ends_at, request

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                if time.monotonic() > self.ends_at:
                    raise httpx_module.ReadTimeout("the answer outlived its call's hard bound", request=self.request)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class BoundedTransport(httpx_module.BaseTransport):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def handle_request(self, request: Any) -> Any:
            response = self.inner.handle_request(request)
            ends_at = _DEADLINE.get()
            if ends_at is not None:
                response.stream = _BoundedStream(response.stream, ends_at, request)
            return response

        def close(self) -> None:
            self.inner.close()

    return BoundedTransport
