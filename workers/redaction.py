"""What monitoring sees of a task: ids, counts and sizes, never a conversation.

Celery shows a task's arguments through two channels, and both are closed here:

- the ``argsrepr`` / ``kwargsrepr`` headers of its message, which the worker copies into its
  task events (Flower's task list, ``/api/tasks``, ``/api/task/info``) and its logs. Celery
  fills them with ``repr(kwargs)`` (up to 1 KiB of each event's text) unless the sender sets
  them: ``workers.dispatch.send`` sets them to ``reprs()``, and every other publish of this
  process (a task's own ``retry``) gets them from the ``before_task_publish`` hook below;
- the worker's ``inspect`` replies (``active``, ``reserved``, ``scheduled``, ``query_task``),
  which Flower asks for on a worker's page and in ``/api/workers``: the stock commands answer
  with the decoded arguments (only ``active`` has a ``safe`` switch, and ``reserved`` has
  none). They are registered again below to answer with the headers instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from celery.signals import before_task_publish
from celery.worker import control
from celery.utils.functional import maybe_list
from celery.worker import state as worker_state
from celery.worker.request import Request

#: task keywords that hold ids or small numbers, shown as they are
ID_KEYWORDS = ("run_id", "agent_id", "session_id", "scope_key", "index", "deferrals")
#: fields of an event shown as they are; everything else of an event counts only in its size
EVENT_ID_FIELDS = ("type", "event_id", "agent_id", "session_id")
#: an id longer than this is shown by its size only
MAX_ID_CHARS = 128


def _is_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and len(value) <= MAX_ID_CHARS and value.isprintable()


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    try:
        return len(json.dumps(value, default=str).encode())
    except (TypeError, ValueError):
        return 0


def _event(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return f"<{type(value).__name__}, {_size(value)} bytes>"
    shown = {k: value[k] for k in EVENT_ID_FIELDS if k in value and _is_id(value[k])}
    shown["bytes"] = _size(value)
    return shown


def _value(key: str | None, value: Any) -> Any:
    if key in ID_KEYWORDS and _is_id(value):
        return value
    if key == "event":
        return _event(value)
    if key == "events" and isinstance(value, Sequence) and not isinstance(value, str):
        return f"<{len(value)} events, {_size(value)} bytes>"
    return f"<{type(value).__name__}, {_size(value)} bytes>"


def reprs(args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """``(argsrepr, kwargsrepr)`` of a task call: ids as they are, events as their ids and
    size, anything else as its type and size. Never empty (Celery logs the full arguments
    when a repr is empty)."""
    shown_args = tuple(_value(None, a) for a in args or ())
    shown_kwargs = {str(k): _value(str(k), v) for k, v in (kwargs or {}).items()}
    return repr(shown_args), repr(shown_kwargs)


@before_task_publish.connect
def _redact_headers(body=None, headers=None, **_: Any) -> None:
    """Every message this process publishes carries the redacted reprs, including the ones
    Celery builds itself (a task's ``retry`` re-sends its arguments with Celery's repr)."""
    if headers is None or "argsrepr" not in headers:  # protocol 1 has no such headers
        return
    try:
        args, kwargs = body[0], body[1]
    except (TypeError, IndexError, KeyError):
        return
    headers["argsrepr"], headers["kwargsrepr"] = reprs(args, kwargs)


# --- the worker's inspect replies: the headers above instead of the decoded arguments --------
@control.inspect_command(alias="dump_active")
def active(state, safe=False, **kwargs):
    """List of tasks currently being executed (arguments as their redacted reprs)."""
    return [request.info(safe=True) for request in state.tset(worker_state.active_requests)]


@control.inspect_command(alias="dump_reserved")
def reserved(state, **kwargs):
    """List of currently reserved tasks, not including scheduled/active (redacted reprs)."""
    waiting = state.tset(worker_state.reserved_requests) - state.tset(worker_state.active_requests)
    return [request.info(safe=True) for request in waiting]


@control.inspect_command(alias="dump_schedule")
def scheduled(state, **kwargs):
    """List of currently scheduled ETA/countdown tasks (redacted reprs)."""
    out = []
    for waiting in state.consumer.timer.schedule.queue:
        try:
            request = waiting.entry.args[0]
        except (IndexError, TypeError):
            continue
        if isinstance(request, Request):
            out.append({"eta": request.eta.isoformat() if request.eta else None,
                        "priority": waiting.priority, "request": request.info(safe=True)})
    return out


@control.inspect_command(variadic="ids", signature="[id1 [id2 [... [idN]]]]")
def query_task(state, ids, **kwargs):
    """Query for task information by id (redacted reprs)."""
    return {
        request.id: (control._state_of_task(request), request.info(safe=True))
        for request in control._find_requests_by_id(maybe_list(ids))
    }
