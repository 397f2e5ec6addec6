"""A configured model that its provider shuts down within 60 days is reported: by the worker
when it is ready and by ``memoryctl runs`` and ``memoryctl cost``. Every day here is frozen,
so the calendar alone never changes a result."""

from __future__ import annotations

import logging
from datetime import date, datetime, timezone

import pytest

from ops import cli
from ops.commands import cost as cost_command
from ops.commands import runs as runs_command
from pipeline.clock import FrozenClock
from pipeline.llm import lifecycle
from schemas.settings import Settings
from workers import deps as worker_deps

# gemini-2.5-pro: shutdown 2026-12-01 on https://ai.google.dev/gemini-api/docs/deprecations
SHUTDOWN = date(2026, 12, 1)


def _gemini(tmp_path=None, **models) -> Settings:
    extra = {"store_url": f"sqlite:///{tmp_path / 'm.db'}"} if tmp_path else {}
    return Settings(_env_file=None, llm_provider="gemini", embedding_provider="hashing", gemini_api_key="g-x",
                    **extra, **models)


@pytest.mark.parametrize("today, warned", [
    (date(2026, 10, 1), False),    # 61 days before
    (date(2026, 10, 2), True),     # 60 days before
    (date(2026, 11, 30), True),
    (date(2027, 1, 5), True),      # already shut down: still said
])
def test_a_model_is_reported_from_sixty_days_before_its_shutdown(today, warned):
    settings = _gemini(gemini_premium_model="gemini-2.5-pro")
    lines = lifecycle.warnings(settings, today)
    assert bool(lines) is warned
    if warned:
        [line] = lines
        assert "gemini-2.5-pro" in line and "MEMORY_GEMINI_PREMIUM_MODEL" in line and "2026-12-01" in line


def test_only_the_models_of_the_active_providers_count():
    # an OpenAI premium model that shuts down soon is not called by a Gemini deployment
    settings = _gemini(openai_premium_model="gpt-5-mini")
    assert lifecycle.warnings(settings, date(2026, 12, 1)) == []
    openai = Settings(_env_file=None, llm_provider="openai", embedding_provider="hashing", openai_api_key="sk-x",
                      openai_fast_model="gpt-5-mini", openai_free_model="gpt-5-mini")
    [line] = lifecycle.warnings(openai, date(2026, 12, 1))
    assert "gpt-5-mini (MEMORY_OPENAI_FAST_MODEL, MEMORY_OPENAI_FREE_MODEL)" in line and "in 10 days" in line


def test_the_worker_warns_when_it_is_ready(monkeypatch, caplog):
    clock = FrozenClock(datetime(2026, 11, 20, tzinfo=timezone.utc))
    deps = worker_deps.Deps(_gemini(gemini_fast_model="gemini-2.5-flash", gemini_free_model="gemini-2.5-flash"))
    deps.__dict__["clock"] = clock
    monkeypatch.setattr(worker_deps, "get_deps", lambda: deps)
    from celery.signals import worker_ready

    with caplog.at_level(logging.WARNING, logger="memory.worker"):
        worker_ready.send(sender=None)
    [record] = [r for r in caplog.records if r.name == "memory.worker"]
    assert "gemini-2.5-flash" in record.getMessage() and "in 11 days" in record.getMessage()


def test_memoryctl_runs_and_cost_report_the_model_first(tmp_path, monkeypatch, capsys):
    from pipeline import clock as clock_module
    from pipeline.store import open_store

    settings = _gemini(tmp_path, gemini_premium_model="gemini-2.5-pro")
    open_store(settings).close()
    for module in (runs_command, cost_command):
        monkeypatch.setattr(module, "get_settings", lambda: settings)
    monkeypatch.setattr(clock_module.Clock, "now", lambda self: datetime(2026, 11, 1, tzinfo=timezone.utc))
    assert cli.main(["runs"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: model gemini-2.5-pro (MEMORY_GEMINI_PREMIUM_MODEL) shuts down on 2026-12-01")
    assert cli.main(["cost", "--agent", "a1"]) == 0
    assert "gemini-2.5-pro" in capsys.readouterr().err

    monkeypatch.setattr(clock_module.Clock, "now", lambda self: datetime(2026, 9, 1, tzinfo=timezone.utc))
    assert cli.main(["runs"]) == 0
    assert "warning" not in capsys.readouterr().err
