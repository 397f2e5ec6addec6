"""Connection URLs with passwords: a Redis URL is taken as redis-py and kombu read it, every
other client's rule is kept, and no error ever shows the password."""

from __future__ import annotations

import pytest
from kombu.utils.url import url_to_parts
from redis.connection import parse_url

from ops.cli import main
from schemas import urls
from schemas.settings import get_settings


@pytest.mark.parametrize(("url", "password"), [
    ("redis://:p@ss@127.0.0.1:6390/0", "p@ss"),
    ("redis://:p@ss:w@rd@127.0.0.1:6390/0", "p@ss:w@rd"),
    ("rediss://default:100%@cache.example:6380/1", "100%"),
    ("redis://:p%40ss@127.0.0.1:6390/0", "p@ss"),           # already encoded: unchanged
    ("redis://:plain@127.0.0.1:6390/0", "plain"),
])
def test_a_redis_url_is_read_as_redis_py_and_kombu_read_it_and_handed_on_encoded(url, password):
    # what the clients themselves make of the URL as typed ...
    assert parse_url(url)["password"] == password and url_to_parts(url).password == password
    # ... is what they get from the setting, in a form every consumer reads alike
    canonical = urls.check_url("MEMORY_BROKER_URL", url, "MEMORY_BROKER_PASSWORD")
    assert parse_url(canonical)["password"] == password and url_to_parts(canonical).password == password
    assert (parse_url(canonical)["host"], parse_url(canonical)["port"]) == (parse_url(url)["host"], parse_url(url)["port"])
    assert "@" not in canonical.rpartition("@")[0].partition("://")[2]


@pytest.mark.parametrize(("url", "char"), [
    ("redis://:pa#ss@redis:6379/0", "#"),     # urllib ends the authority there: the host would be "pa"
    ("redis://:pa/ss@redis:6379/0", "/"),
    ("redis://:pa?ss@redis:6379/0", "?"),
    ("redis://us:er:pa[ss@redis:6379/0", "["),
    ("mongodb://memory:p@ss@mongo:27017/memory", "@"),   # pymongo refuses any (parse_userinfo)
    ("mongodb://memory:pa:ss@mongo:27017/memory", ":"),
])
def test_what_a_client_would_misread_is_refused_without_quoting_the_password(url, char):
    with pytest.raises(ValueError) as refused:
        urls.check_url("MEMORY_X_URL", url, "MEMORY_X_PASSWORD")
    message = str(refused.value)
    assert f"contains {char!r}" in message and "MEMORY_X_PASSWORD" in message
    assert "pa" not in message.replace("password", "").replace("MEMORY_X_PASSWORD", "")


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:p@ss@127.0.0.1:6390/0", "redis://:***@127.0.0.1:6390/0"),
    ("mongodb://memory:s3cret@mongo/memory", "mongodb://memory:***@mongo/memory"),
    ("redis://127.0.0.1:6390/0", "redis://127.0.0.1:6390/0"),
    ("sqlite:///memory.db", "sqlite:///memory.db"),
])
def test_mask_hides_the_password_of_any_url(url, shown):
    assert urls.mask(url) == shown


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in ("MEMORY_BROKER_URL", "MEMORY_STORE_URL", "MEMORY_BROKER_PASSWORD", "MEMORY_STORE_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


@pytest.mark.parametrize(("setting", "url", "secret"), [
    ("MEMORY_BROKER_URL", "redis://:hunter#2@127.0.0.1:6390/0", "hunter"),
    ("MEMORY_STORE_URL", "mongodb://memory:hunter@2@mongo:27017/memory", "hunter"),
])
def test_memoryctl_names_a_refused_url_once_in_one_line_without_its_password(env, capsys, setting, url, secret):
    env.setenv(setting, url)
    assert main(["runs"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert secret not in err and err.count(setting) == 1 and "***" in err


def test_memoryctl_shows_no_value_of_a_refused_password_setting(env, capsys):
    env.setenv("MEMORY_BROKER_URL", "unix:///tmp/redis.sock")
    env.setenv("MEMORY_BROKER_PASSWORD", "hunter2")
    assert main(["runs"]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "MEMORY_BROKER_PASSWORD is set" in err


def test_a_settings_error_raised_outside_memoryctl_shows_no_value(monkeypatch):
    from pydantic import ValidationError

    from schemas.settings import Settings

    monkeypatch.setenv("MEMORY_BROKER_URL", "redis://:hunter#2@127.0.0.1:6390/0")
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert "hunter" not in str(refused.value)  # what a worker's traceback prints
