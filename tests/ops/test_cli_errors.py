"""Configuration and infrastructure errors: one line naming the setting or host, exit 2,
never a traceback (``ops.failures``)."""

from __future__ import annotations

import pytest

from ops.cli import main
from testkit.procs import free_port
from schemas.settings import Settings, get_settings


@pytest.fixture(autouse=True)
def fresh_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("memoryctl ")]
    assert "Traceback" not in captured.err and len(errors) == 1, captured.err
    return errors[0]


def test_a_setting_that_is_not_json_is_named(monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_SEARCH_BY_MODEL", "notjson")
    assert main(["runs"]) == 2
    assert "MEMORY_SEARCH_BY_MODEL cannot be parsed" in _one_line_error(capsys)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MEMORY_CLAIM_LEASE_S", "-5"),
        ("MEMORY_CONTEXT_CACHE_TTL_S", "-1"),
        ("MEMORY_MAX_RUN_ATTEMPTS", "0"),
        ("MEMORY_SWEEP_BATCH_SIZE", "-10"),
        ("MEMORY_PUBLISH_RETRY_MAX", "-1"),
        ("MEMORY_MIN_MESSAGES_TO_FORM", "0"),
        ("MEMORY_BROKER_VISIBILITY_TIMEOUT_S", "0"),
    ],
)
def test_negative_counts_and_ttls_are_refused_by_name(monkeypatch, capsys, variable, value):
    monkeypatch.setenv(variable, value)
    assert main(["runs"]) == 2
    line = _one_line_error(capsys)
    assert f"{variable}: Input should be greater than" in line and repr(value) in line


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"task_soft_time_limit_s": 300, "task_time_limit_s": 300}, "MEMORY_TASK_SOFT_TIME_LIMIT_S must be below"),
        ({"claim_lease_s": 200}, "MEMORY_CLAIM_LEASE_S must be above MEMORY_TASK_TIME_LIMIT_S"),
        ({"consolidation_lease_s": 300}, "MEMORY_CONSOLIDATION_LEASE_S must be above"),
        ({"broker_visibility_timeout_s": 120}, "MEMORY_TASK_RETRY_BACKOFF_MAX_S must be below"),
    ],
)
def test_limits_that_contradict_each_other_are_refused(monkeypatch, capsys, overrides, named):
    with pytest.raises(ValueError, match=named):
        Settings(_env_file=None, **overrides)
    for key, value in overrides.items():
        monkeypatch.setenv(f"MEMORY_{key.upper()}", str(value))
    assert main(["runs"]) == 2
    assert named in _one_line_error(capsys)


def test_the_defaults_and_limits_that_agree_are_accepted():
    Settings(_env_file=None)
    Settings(_env_file=None, claim_lease_s=60, task_soft_time_limit_s=30, task_time_limit_s=50,
             consolidation_lease_s=55, broker_visibility_timeout_s=10, task_retry_backoff_max_s=5)


@pytest.fixture
def fast_mongo_timeouts(monkeypatch):
    from ops.commands import migrate
    from pipeline.store.mongo import store as mongo_store

    monkeypatch.setattr(mongo_store, "TIMEOUTS_MS", {k: 300 for k in mongo_store.TIMEOUTS_MS})
    monkeypatch.setattr(migrate, "MONGO_TIMEOUT_MS", 300)


@pytest.mark.parametrize("command", [["runs"], ["rejected"], ["context", "--agent", "a1", "--session", "s1"]])
def test_an_unreachable_mongodb_store_names_its_host(monkeypatch, capsys, fast_mongo_timeouts, command):
    port = free_port()
    monkeypatch.setenv("MEMORY_STORE_URL", f"mongodb://user:secret@127.0.0.1:{port}/memory")
    assert main(command) == 2
    line = _one_line_error(capsys)
    assert f"MongoDB at mongodb://user:**@127.0.0.1:{port}/memory (MEMORY_STORE_URL) is unreachable" in line
    assert "secret" not in line


def test_migrate_v1_with_an_unreachable_source_names_the_option(monkeypatch, capsys, fast_mongo_timeouts):
    port = free_port()
    assert main(["migrate-v1", "--source-url", f"mongodb://127.0.0.1:{port}/old"]) == 2
    line = _one_line_error(capsys)
    assert f"MongoDB at mongodb://127.0.0.1:{port}/old (--source-url) is unreachable" in line


def test_migrate_v1_with_no_database_in_the_source_url_says_how_to_name_one(capsys):
    assert main(["migrate-v1", "--source-url", f"mongodb://127.0.0.1:{free_port()}"]) == 2
    assert "give --source-db or put the database name in --source-url" in _one_line_error(capsys)


def test_an_unreachable_broker_names_the_setting(monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_BROKER_URL", f"redis://:pw@127.0.0.1:{free_port()}/0")
    monkeypatch.setenv("MEMORY_PUBLISH_RETRY_MAX", "0")
    monkeypatch.setenv("MEMORY_PUBLISH_TIMEOUT_S", "0.5")
    import workers.producer as producer

    monkeypatch.setattr(producer, "_default", None)
    assert main(["end-session", "--agent", "a1", "--session", "s1"]) == 2
    line = _one_line_error(capsys)
    assert "did not accept" in line and "pw@" not in line


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["runs", "--limit", "-5"], "--limit: must be at least 1, got -5"),
        (["rejected", "--limit", "0"], "--limit: must be at least 1, got 0"),
        (["reembed", "--batch", "zero"], "--batch: expected a whole number, got 'zero'"),
        (["replay", "f.jsonl", "--timeout", "-1"], "--timeout: must be more than 0 seconds, got -1.0"),
    ],
)
def test_counts_and_durations_on_the_command_line_are_checked(capsys, command, says):
    with pytest.raises(SystemExit) as stopped:
        main(command)
    assert stopped.value.code == 2 and says in capsys.readouterr().err


def test_an_empty_agent_id_is_not_registered(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    assert main(["agent", "set", " ", "--name", "x"]) == 2
    assert "AGENT_ID: must be a non-empty agent id" in _one_line_error(capsys)
