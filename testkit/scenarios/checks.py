"""Static checks of the reliability report: what the compose stack exposes without auth, and
what a log reveals (API keys, message text) above DEBUG.

Both return findings as plain strings; an empty list means nothing leaks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_REQUIRED_VAR = re.compile(r"^\$\{(?P<name>\w+):\?[^}]*\}$")
_ANY_VAR = re.compile(r"\$\{(?P<name>\w+)(?P<op>:?[-?+])?(?P<rest>[^}]*)\}")
_REDIS_URL = re.compile(r"rediss?://(?P<auth>[^@/]*@)?")
_LOOPBACK = ("127.0.0.1:", "localhost:", "[::1]:")


def load_compose(path: str | Path) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) if "=" in item else (item, "") for item in env)
        return {k: v for k, v in pairs}
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _command(service: Mapping[str, Any]) -> str:
    cmd = service.get("command") or ""
    return " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)


def _is_required_secret(value: str) -> bool:
    """A secret that compose refuses to start without (``${NAME:?why}``), never a default."""
    return bool(_REQUIRED_VAR.match(value.strip()))


def _secret_of(token: str, env: Mapping[str, str]) -> str | None:
    """Resolve ``$${NAME}`` / ``$NAME`` (the container's own variable) to its compose value."""
    token = token.strip().strip("\"'")
    inner = re.fullmatch(r"\$\$\{(\w+)\}|\$\$(\w+)|\$\{(\w+)\}|\$(\w+)", token)
    if inner:
        name = next(g for g in inner.groups() if g)
        return env.get(name)
    return token or None


def _published_ports(service: Mapping[str, Any]) -> list[str]:
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            host_ip = str(port.get("host_ip") or "")
            out.append(f"{host_ip}:{port.get('published')}:{port.get('target')}" if host_ip else str(port.get("published")))
        else:
            out.append(str(port))
    return out


def _public(port: str) -> bool:
    return not port.startswith(_LOOPBACK)


def compose_exposures(doc: Mapping[str, Any]) -> list[str]:
    """Ways the compose stack can be reached without a credential, or with a guessable one."""
    findings: list[str] = []
    services: Mapping[str, Any] = doc.get("services") or {}
    for name, service in services.items():
        env = _env(service)
        command = _command(service)
        image = str(service.get("image") or "")
        is_redis = image.startswith("redis") or "redis-server" in command
        is_flower = re.search(r"(^|\s)flower(\s|$)", command) is not None or image.startswith("mher/flower")

        if is_redis:
            match = re.search(r"--requirepass\s+(\S+)", command)
            if not match:
                findings.append(f"{name}: redis-server runs without --requirepass")
            else:
                secret = _secret_of(match.group(1), env)
                if secret is None or not _is_required_secret(secret):
                    findings.append(f"{name}: the redis password is not a required variable (${{NAME:?...}}): {secret!r}")
            if "--protected-mode no" in command and not match:
                findings.append(f"{name}: protected mode is off and no password is set")

        for key, value in env.items():
            for url in _REDIS_URL.finditer(value):
                auth = (url.group("auth") or "").rstrip("@")
                password = auth.split(":", 1)[1] if ":" in auth else ""
                if not password and key.endswith("_URL"):  # given on its own (MEMORY_BROKER_PASSWORD)
                    password = str(env.get(key[: -len("_URL")] + "_PASSWORD") or "")
                if not password:
                    findings.append(f"{name}: {key} connects to Redis without a password")
                elif not _ANY_VAR.search(password) or not _is_required_secret(_ANY_VAR.search(password).group(0)):
                    findings.append(f"{name}: {key} has a Redis password that is not a required variable")

        if is_flower:
            auth = env.get("FLOWER_BASIC_AUTH") or env.get("FLOWER_AUTH")
            flag = re.search(r"--(?:basic[-_]auth|auth)[= ](\S+)", command)
            if flag:
                auth = _secret_of(flag.group(1), env) or auth
            if not auth:
                findings.append(f"{name}: Flower runs without --basic-auth / FLOWER_BASIC_AUTH")
            elif not _is_required_secret(auth):
                findings.append(f"{name}: Flower's credentials are not a required variable: {auth!r}")
            if str(env.get("FLOWER_UNAUTHENTICATED_API", "")).lower() in ("1", "true", "yes"):
                findings.append(f"{name}: FLOWER_UNAUTHENTICATED_API opens the HTTP API without auth")

        if image.startswith(("mongo", "mongodb/")):
            public = [p for p in _published_ports(service) if _public(p)]
            password = env.get("MONGODB_INITDB_ROOT_PASSWORD") or env.get("MONGO_INITDB_ROOT_PASSWORD")
            if public and not (password and _is_required_secret(password)):
                findings.append(f"{name}: MongoDB is published on {public} without a required root password")
    return findings


def log_leaks(lines: Iterable[str], secrets: Iterable[str]) -> list[str]:
    """Log lines that contain any of ``secrets`` (API keys, distinctive message text)."""
    wanted = [s for s in secrets if s]
    return [line.rstrip("\n") for line in lines if any(s in line for s in wanted)]


def log_leaks_above_debug(lines: Iterable[str], secrets: Iterable[str]) -> list[str]:
    """Like ``log_leaks`` on a Celery/std logging text log, ignoring lines logged at DEBUG."""
    kept = [line for line in lines if not re.search(r"\bDEBUG\b", line[:80])]
    return log_leaks(kept, secrets)
