"""The compose stack exposes neither Flower nor Redis without a credential (design §9)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from testkit.scenarios.checks import compose_exposures, load_compose

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE.exists(), f"{COMPOSE} is missing: design §2 requires the real stack"
    return load_compose(COMPOSE)


def _service(doc: dict, predicate) -> str:
    names = [name for name, svc in doc["services"].items() if predicate(svc)]
    assert names, "the compose file has no such service"
    return names[0]


def _flower(doc: dict) -> str:
    return _service(doc, lambda s: "flower" in str(s.get("command", "")))


def _redis(doc: dict) -> str:
    return _service(doc, lambda s: str(s.get("image", "")).startswith("redis"))


def test_the_compose_stack_reaches_nothing_without_a_credential(compose):
    assert compose_exposures(compose) == []


def test_the_compose_stack_runs_redis_with_append_only_persistence(compose):
    assert "--appendonly yes" in " ".join(map(str, compose["services"][_redis(compose)]["command"]))


def test_flower_without_basic_auth_is_reported(compose):
    doc = copy.deepcopy(compose)
    flower = doc["services"][_flower(doc)]
    env = flower["environment"]
    env.pop("FLOWER_BASIC_AUTH", None)
    flower["command"] = [c for c in flower["command"] if "basic" not in str(c)]
    assert any("Flower runs without" in f for f in compose_exposures(doc))


def test_flower_with_its_unauthenticated_api_switched_on_is_reported(compose):
    doc = copy.deepcopy(compose)
    doc["services"][_flower(doc)]["environment"]["FLOWER_UNAUTHENTICATED_API"] = "true"
    assert any("FLOWER_UNAUTHENTICATED_API" in f for f in compose_exposures(doc))


def test_a_redis_without_requirepass_is_reported(compose):
    doc = copy.deepcopy(compose)
    redis = doc["services"][_redis(doc)]
    redis["command"] = ["redis-server", "--appendonly", "yes"]
    assert any("without --requirepass" in f for f in compose_exposures(doc))


def test_a_password_with_a_guessable_default_is_reported(compose):
    doc = copy.deepcopy(compose)
    redis = doc["services"][_redis(doc)]
    redis["command"] = ["redis-server", "--requirepass", "${REDIS_PASSWORD:-changeme}"]
    assert any("not a required variable" in f for f in compose_exposures(doc))


def test_a_broker_password_given_on_its_own_must_be_a_required_variable(compose):
    doc = copy.deepcopy(compose)
    name, svc = next((n, s) for n, s in doc["services"].items() if "MEMORY_BROKER_PASSWORD" in (s.get("environment") or {}))
    svc["environment"] = dict(svc["environment"], MEMORY_BROKER_PASSWORD="${REDIS_PASSWORD:-changeme}")
    assert f"{name}: MEMORY_BROKER_URL has a Redis password that is not a required variable" in compose_exposures(doc)


def test_a_broker_url_without_a_password_is_reported(compose):
    doc = copy.deepcopy(compose)
    name, svc = next((n, s) for n, s in doc["services"].items() if "MEMORY_BROKER_URL" in (s.get("environment") or {}))
    env = {k: v for k, v in svc["environment"].items() if k != "MEMORY_BROKER_PASSWORD"}
    svc["environment"] = dict(env, MEMORY_BROKER_URL="redis://redis:6379/0")
    assert f"{name}: MEMORY_BROKER_URL connects to Redis without a password" in compose_exposures(doc)
