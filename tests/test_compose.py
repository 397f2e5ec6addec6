"""The compose file describes the stack of SPEC §9: checked by parsing it, and by
``docker compose config`` where a docker compose plugin is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline import names

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
WORKERS = ("worker-ingest", "worker-formation", "worker-consolidation", "worker-maintenance")


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def _option(command: list[str], *flags: str) -> str | None:
    for i, arg in enumerate(command):
        if arg in flags:
            return command[i + 1]
        for flag in flags:
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def test_every_service_has_a_healthcheck(services):
    missing = [name for name, svc in services.items() if not svc.get("healthcheck", {}).get("test")]
    assert missing == []


def test_mongo_is_the_atlas_local_image(services):
    assert services["mongo"]["image"].startswith("mongodb/mongodb-atlas-local")


def test_redis_fsyncs_every_write_so_an_accepted_event_survives_a_crash(services):
    command = " ".join(services["redis"]["command"])
    assert "--appendfsync always" in command


def test_redis_persists_append_only_and_requires_a_password_from_the_environment(services):
    command = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in command
    assert "--requirepass" in command
    assert "${REDIS_PASSWORD" in str(services["redis"]["environment"]["REDIS_PASSWORD"])
    assert "REDIS_PASSWORD" in " ".join(services["redis"]["healthcheck"]["test"])


def test_only_flower_is_published_beyond_the_loopback(services):
    exposed = {}
    for name, svc in services.items():
        for port in svc.get("ports", []):
            if not str(port).startswith("127.0.0.1:"):
                exposed.setdefault(name, []).append(port)
    assert list(exposed) == ["flower"]
    assert "ports" not in services["redis"]


def test_every_queue_has_a_worker_and_the_llm_stages_run_on_threads(services):
    consumed = {}
    for name in WORKERS:
        command = services[name]["command"]
        assert command[:4] == ["celery", "-A", "workers.app", "worker"]
        for queue in _option(command, "-Q", "--queues").split(","):
            consumed[queue] = name
    assert set(consumed) == set(names.QUEUES)
    ingest = services[consumed[names.QUEUE_INGEST]]["command"]
    formation = services[consumed[names.QUEUE_FORMATION]]["command"]
    assert _option(ingest, "--pool", "-P") == "prefork"
    assert _option(formation, "--pool", "-P") == "threads"
    assert int(_option(formation, "--concurrency", "-c")) >= 8


def test_workers_send_task_events_so_flower_sees_every_stage(services):
    for name in WORKERS:
        assert "-E" in services[name]["command"]


def test_exactly_one_beat(services):
    beats = [name for name, svc in services.items() if "beat" in (svc.get("command") or [])]
    assert beats == ["beat"]
    assert "deploy" not in services["beat"]


def test_flower_uses_basic_auth_from_the_environment(services):
    flower = services["flower"]
    # workers.flower puts /metrics behind the same credentials
    assert flower["command"][:4] == ["celery", "-A", "workers.flower", "flower"]
    assert "${FLOWER_BASIC_AUTH" in flower["environment"]["FLOWER_BASIC_AUTH"]
    assert "FLOWER_UNAUTHENTICATED_API" not in flower["environment"]


def test_indexes_are_created_once_before_any_worker_starts(services):
    assert services["create-indexes"]["command"] == ["memoryctl", "create-indexes"]
    assert services["create-indexes"]["restart"] == "no"
    for name in (*WORKERS, "beat"):
        deps = services[name]["depends_on"]
        assert deps["create-indexes"]["condition"] == "service_completed_successfully"
        assert deps["redis"]["condition"] == "service_healthy"


def test_services_reach_redis_with_its_password_and_mongo_through_the_store_url(services):
    for name in (*WORKERS, "beat", "flower", "create-indexes"):
        env = services[name]["environment"]
        assert env["MEMORY_BROKER_URL"].startswith("redis://:${REDIS_PASSWORD")
        assert env["MEMORY_STORE_URL"].startswith("mongodb://")


def test_no_service_configures_a_result_backend(services):
    # every send ignores its result; a configured backend would only be one more thing to reach
    assert [name for name, svc in services.items() if "MEMORY_RESULT_BACKEND" in (svc.get("environment") or {})] == []


def _compose_available() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(not _compose_available(), reason="no docker compose plugin on this machine")
def test_docker_compose_accepts_the_file():
    env = {
        **os.environ,
        "REDIS_PASSWORD": "r", "MONGO_PASSWORD": "m", "FLOWER_BASIC_AUTH": "u:p",
    }
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert result.returncode == 0, result.stderr
