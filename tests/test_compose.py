"""The compose file describes the stack of design §9: checked by parsing it, and by
``docker compose config`` where a docker compose plugin is installed."""

from __future__ import annotations

import os
import re
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
        assert env["MEMORY_BROKER_URL"] == "redis://redis:6379/0"
        assert env["MEMORY_BROKER_PASSWORD"].startswith("${REDIS_PASSWORD:?")
        assert env["MEMORY_STORE_URL"].startswith("mongodb://") and "MONGO_PASSWORD" not in env["MEMORY_STORE_URL"]
        assert env["MEMORY_STORE_PASSWORD"].startswith("${MONGO_PASSWORD:?")


_VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?::(?P<op>[?-])(?P<arg>[^}]*))?\}")


def _substitute(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation of ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}``
    (https://docs.docker.com/reference/compose-file/interpolation/)."""
    def one(match):
        name, op, arg = match.group("name", "op", "arg")
        if env.get(name):
            return env[name]
        if op == "?":
            raise KeyError(f"{name}: {arg}")
        return arg if op == "-" else ""
    return _VARIABLE.sub(one, value)


NASTY = {"REDIS_PASSWORD": "p@ss:w/rd?#[x]%", "MONGO_PASSWORD": "m0ng@:/?#%zz", "MONGO_USER": "memory",
         "FLOWER_BASIC_AUTH": "ops:fl@w:er"}


@pytest.mark.parametrize("name", [*WORKERS, "beat", "flower", "create-indexes"])
def test_a_password_with_url_reserved_characters_reaches_every_client_intact(services, name, monkeypatch):
    from kombu.utils.url import parse_url
    from pymongo.uri_parser import parse_uri

    from schemas.settings import Settings

    for key in [k for k in os.environ if k.startswith("MEMORY_")]:
        monkeypatch.delenv(key)
    for key, value in services[name]["environment"].items():
        monkeypatch.setenv(key, _substitute(str(value), NASTY))
    settings = Settings()
    broker = parse_url(settings.broker_url)
    assert (broker["hostname"], broker["port"], broker["password"]) == ("redis", 6379, NASTY["REDIS_PASSWORD"])
    store = parse_uri(settings.store_url)
    assert store["nodelist"] == [("mongo", 27017)]
    assert (store["username"], store["password"]) == ("memory", NASTY["MONGO_PASSWORD"])
    assert store["database"] == "memory" and store["options"]["authSource"] == "admin"


@pytest.mark.parametrize(("setting", "url", "char"), [
    ("MEMORY_BROKER_URL", "redis://:p@ss@redis:6379/0", "@"),
    ("MEMORY_BROKER_URL", "redis://:pa#ss@redis:6379/0", "#"),
    ("MEMORY_BROKER_URL", "redis://:pa/ss@redis:6379/0", "/"),
    ("MEMORY_BROKER_URL", "redis://:pa?ss@redis:6379/0", "?"),
    ("MEMORY_STORE_URL", "mongodb://memory:pa:ss@mongo:27017/memory", ":"),
    ("MEMORY_STORE_URL", "mongodb://memory:100%@mongo:27017/memory", "%"),
])
def test_a_raw_reserved_character_in_a_url_password_is_a_clear_error(setting, url, char, monkeypatch):
    from pydantic import ValidationError

    from schemas.settings import Settings

    monkeypatch.setenv(setting, url)
    with pytest.raises(ValidationError) as caught:
        Settings()
    [error] = caught.value.errors()
    assert error["loc"] == (setting.removeprefix("MEMORY_").lower(),)
    assert f"{setting}: the password contains {char!r}, which must be percent-encoded" in error["msg"]
    password_setting = setting.replace("_URL", "_PASSWORD")
    assert f"set {password_setting}, which is encoded for you" in error["msg"]


def test_a_password_already_percent_encoded_in_the_url_is_accepted(monkeypatch):
    from kombu.utils.url import parse_url

    from schemas.settings import Settings

    monkeypatch.setenv("MEMORY_BROKER_URL", "redis://:p%40ss%23@redis:6379/0")
    assert parse_url(Settings().broker_url)["password"] == "p@ss#"


def test_no_service_configures_a_result_backend(services):
    # every send ignores its result; a configured backend would only be one more thing to reach
    assert [name for name, svc in services.items() if "MEMORY_RESULT_BACKEND" in (svc.get("environment") or {})] == []


def test_jaeger_runs_only_with_the_tracing_profile_and_shows_its_ui_on_the_loopback(services):
    jaeger = services["jaeger"]
    assert jaeger["profiles"] == ["tracing"] and jaeger["image"].startswith("jaegertracing/all-in-one:")
    assert jaeger["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert [p for p in jaeger["ports"] if p.endswith(":16686")] and all(p.startswith("127.0.0.1:") for p in jaeger["ports"])
    # the other services have no profile: `docker compose up` without --profile starts no Jaeger
    assert [name for name, svc in services.items() if svc.get("profiles")] == ["jaeger"]


def test_every_app_service_exports_traces_only_when_an_otlp_endpoint_is_given(services):
    for name in (*WORKERS, "beat"):
        env = services[name]["environment"]
        # empty by default: workers.telemetry keeps the OpenTelemetry API a no-op
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "${OTEL_EXPORTER_OTLP_ENDPOINT:-}"
        assert env["OTEL_SERVICE_NAME"] == "memory-pipeline"
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318 docker compose --profile tracing up" in COMPOSE.read_text()
    assert "otel" in (ROOT / "Dockerfile").read_text().split("pip install", 1)[1].split("\\", 1)[0]


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
    for profile in ([], ["--profile", "tracing"]):
        result = subprocess.run(
            ["docker", "compose", "-f", str(COMPOSE), *profile, "config", "--quiet"],
            capture_output=True, text=True, env=env, timeout=60,
        )
        assert result.returncode == 0, result.stderr


def test_the_http_api_is_served_by_memoryctl_with_a_health_check_after_the_indexes(services):
    api = services["api"]
    assert api["command"][:2] == ["memoryctl", "serve"] and _option(api["command"], "--host") == "0.0.0.0"
    port = _option(api["command"], "--port")
    assert f"http://127.0.0.1:{port}/healthz" in " ".join(api["healthcheck"]["test"])
    assert api["depends_on"]["create-indexes"]["condition"] == "service_completed_successfully"
    assert api["depends_on"]["redis"]["condition"] == "service_healthy"  # the rate limits live there
    assert all(str(p).startswith("127.0.0.1:") for p in api["ports"])
    assert "${API_TOKEN_SECRETS" in api["environment"]["MEMORY_API_TOKEN_SECRETS"]


def test_the_image_ships_the_api_package_and_its_extra():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY api ./api" in dockerfile
    install = re.search(r"pip install '\.\[([^\]]*)\]'", dockerfile).group(1).split(",")
    assert "api" in install
