"""Clients injected as a worker process holds them, and a recording broker for hand-ons."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from pipeline.clock import FrozenClock
from schemas.settings import Settings
from workers.app import app
from workers.deps import Deps, set_deps

from testkit.formation import make_env


@pytest.fixture
def worker_deps(tmp_path):
    """``make(**settings)``: a SQLite store in ``tmp_path`` and a frozen clock, injected into
    the tasks through ``set_deps``; removed and closed after the test."""
    made: list[Deps] = []

    def make(**overrides) -> Deps:
        d = Deps(Settings(store_url=f"sqlite:///{tmp_path / 'memory.db'}", **overrides))
        d.__dict__["clock"] = FrozenClock()
        d.store.create_indexes()
        set_deps(d)
        made.append(d)
        return d

    yield make
    set_deps(None)
    for d in made:
        d.store.close()


@pytest.fixture
def injected(tmp_path):
    """The formation fakes (``testkit.formation.make_env``: scripted LLM, SQLite store,
    frozen clock), injected as the worker's clients; removed and closed after the test."""
    env = make_env(tmp_path)
    set_deps(env)
    yield env
    set_deps(None)
    env.store.close()


@pytest.fixture
def sent(monkeypatch):
    """Every task the code under test sends, as (name, kwargs), instead of reaching a broker."""
    calls: list[tuple[str, dict]] = []
    # Celery's own Task.apply_async (a retry) passes args and kwargs by position
    monkeypatch.setattr(app, "send_task", lambda name, args=None, kwargs=None, **_: calls.append((name, kwargs)))
    return calls


@pytest.fixture
def delivery(sent):
    """``delivery(task, retries, **kwargs)``: a block in which ``task.request`` is a worker's
    delivery of ``task(**kwargs)`` after ``retries`` retries. A retry the task asks for goes
    through Celery's own ``Task.retry`` (its ``max_retries`` check included): the new message
    lands in ``sent`` and ``Retry`` is raised, with the countdown as ``when``."""

    @contextmanager
    def deliver(task, retries: int = 0, **kwargs):
        task.push_request(retries=retries, called_directly=False, is_eager=False, id="t-1", args=(),
                          kwargs=kwargs, delivery_info={})
        try:
            yield task
        finally:
            task.pop_request()

    return deliver
