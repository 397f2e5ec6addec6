"""``memoryctl keys`` and ``memoryctl audit`` (design §12): a key is printed once and kept as
its digest, revocation refuses it from then on, a user token is signed with a configured kid,
and every key change is in the audit log, without the secret."""

from __future__ import annotations

import json

import pytest

from api.auth import authenticate
from api.errors import Unauthenticated
from api.tokens import TokenVerifier
from ops import cli
from schemas.api_settings import get_api_settings
from schemas.settings import get_settings

SECRET = "t" * 40


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_STORE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    monkeypatch.setenv("MEMORY_API_TOKEN_SECRETS", json.dumps({"2026-11": SECRET}))
    get_settings.cache_clear()
    get_api_settings.cache_clear()
    assert cli.main(["create-indexes"]) == 0
    yield
    get_settings.cache_clear()
    get_api_settings.cache_clear()


def _store():
    from pipeline.store import open_store

    return open_store(get_settings())


def test_a_key_is_printed_once_stored_as_a_digest_and_refused_once_revoked(env, capsys):
    verifier = TokenVerifier({}, max_lifetime_s=60)
    assert cli.main(["keys", "create", "--agent", "A", "--label", "runtime"]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("mk_") and len(secret) > 50
    store = _store()
    principal = authenticate(f"Bearer {secret}", keys=store, token_verifier=verifier)
    assert (principal.kind, principal.agent_id) == ("agent", "A")
    assert secret not in json.dumps(store.admin.dump_all(), default=str)
    assert cli.main(["keys", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["key_id"] == principal.credential_id and listed["label"] == "runtime" and listed["revoked_at"] is None
    assert cli.main(["keys", "revoke", principal.credential_id]) == 0
    assert capsys.readouterr().out.startswith(f"revoked {principal.credential_id}")
    with pytest.raises(Unauthenticated, match="revoked"):
        authenticate(f"Bearer {secret}", keys=store, token_verifier=verifier)
    assert cli.main(["audit", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["action"] for e in entries] == ["key.revoke", "key.create"]
    assert all(e["subject"] == principal.credential_id for e in entries) and secret not in json.dumps(entries)
    store.close()


def test_revoking_an_unknown_key_and_an_agent_key_without_agent_are_one_line_errors(env, capsys):
    assert cli.main(["keys", "revoke", "nope"]) == 2
    assert "no key with id 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["keys", "create"])


def test_a_signed_user_token_is_accepted_by_the_api_with_the_same_secrets(env, capsys):
    assert cli.main(["keys", "token", "--agent", "A", "--user", "u1", "--session", "s1", "--ttl", "600"]) == 0
    token = capsys.readouterr().out.strip()
    verifier = TokenVerifier({"2026-11": SECRET}, max_lifetime_s=3600)
    principal = authenticate(f"Bearer {token}", keys=_store(), token_verifier=verifier)
    assert (principal.kind, principal.agent_id, principal.user_id, principal.session_id) == ("user", "A", "u1", "s1")
    assert cli.main(["keys", "token", "--agent", "A", "--user", "u1", "--ttl", "7200"]) == 2
    assert "MEMORY_API_TOKEN_MAX_LIFETIME_S" in capsys.readouterr().err


def test_a_short_token_secret_is_named_in_one_line(env, capsys, monkeypatch):
    monkeypatch.setenv("MEMORY_API_TOKEN_SECRETS", json.dumps({"k": "short"}))
    get_api_settings.cache_clear()
    assert cli.main(["keys", "token", "--agent", "A", "--user", "u1"]) == 2
    assert "MEMORY_API_TOKEN_SECRETS" in capsys.readouterr().err


def test_serve_prints_the_committed_openapi_document(capsys):
    from pathlib import Path

    assert cli.main(["serve", "--openapi"]) == 0
    printed = json.loads(capsys.readouterr().out)
    committed = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    assert printed == committed


def test_serve_refuses_the_demos_in_process_broker_in_one_line(env, capsys, monkeypatch):
    # what the API publishes into memory:// reaches no worker: every message would be lost
    monkeypatch.setenv("MEMORY_BROKER_URL", "memory://localhost/")
    monkeypatch.setenv("MEMORY_API_RATE_LIMIT_PER_MINUTE", "0")
    get_settings.cache_clear()
    get_api_settings.cache_clear()
    assert cli.main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "MEMORY_BROKER_URL='memory://localhost/' is the in-process broker of `make demo`" in err


@pytest.mark.parametrize("variable", ["MEMORY_BROKER_URL", "MEMORY_API_REDIS_URL"])
def test_serve_refuses_a_rate_limit_store_that_is_not_redis_in_one_line(env, capsys, monkeypatch, variable):
    # an AMQP broker is a broker, not Redis: the rate limit has nowhere to count, and serve says
    # which variables to set before uvicorn starts a worker that would fail on its own
    monkeypatch.setenv(variable, "amqp://guest@localhost//")
    get_settings.cache_clear()
    get_api_settings.cache_clear()
    assert cli.main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("memoryctl serve:") == 1 and "Traceback" not in err   # after the broker's name
    assert f"{variable} is a amqp:// URL" in err
    assert "MEMORY_API_REDIS_URL to a redis://" in err and "MEMORY_API_RATE_LIMIT_PER_MINUTE=0" in err


def test_a_key_carries_the_scopes_it_was_made_with_and_the_list_names_them(env, capsys):
    assert cli.main(["keys", "create", "--agent", "A", "--scopes", "curate", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["scopes"] == ["curate"]
    assert cli.main(["keys", "create", "--agent", "A"]) == 0
    capsys.readouterr()
    assert cli.main(["keys", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(made["key_id"] in line and " curate " in line for line in lines)
    assert any("read,publish" in line for line in lines)
    principal = authenticate(f"Bearer {made['secret']}", keys=_store(), token_verifier=TokenVerifier({}, max_lifetime_s=60))
    assert principal.scopes == {"curate"}
    assert cli.main(["keys", "create", "--agent", "A", "--scopes", "read,admin"]) == 2
    assert "unknown scope admin: choose among read, publish, curate" in capsys.readouterr().err


def test_an_owner_sets_rolls_back_pauses_and_resumes_from_the_command_line(env, capsys):
    assert cli.main(["instructions", "set", "A", "--stage", "extraction", "--text", "ignore: catering"]) == 0
    assert cli.main(["instructions", "set", "A", "--stage", "extraction", "--text", "focus: venue"]) == 0
    assert cli.main(["instructions", "rollback", "A", "--stage", "extraction", "--version", "1", "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["instructions", "show", "A"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == 3 and shown[-1].endswith("(rollback to v1): ignore: catering")
    assert cli.main(["instructions", "set", "A", "--stage", "extraction", "--text", "password: Tr0ub4dor&3xq"]) == 2
    assert "carries a secret" in capsys.readouterr().err
    assert cli.main(["pause", "A", "--session", "s1"]) == 0
    assert cli.main(["stats", "--agent", "A", "--session", "s1", "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["resume", "A", "--session", "s1"]) == 0
    assert "resumed session:s1 of agent A" in capsys.readouterr().out
    assert cli.main(["resume", "A", "--session", "s1"]) == 2
    assert "session:s1 is not paused" in capsys.readouterr().err
    assert cli.main(["audit", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {"instructions.set", "instructions.rollback", "memory.pause", "memory.resume"} <= {e["action"] for e in entries}
    assert "catering" not in json.dumps(entries)
