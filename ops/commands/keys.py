"""``memoryctl keys``: the API's credentials (design §12).

    memoryctl keys create --admin [--label L]          # every agent
    memoryctl keys create --agent A [--label L]        # one agent: read any of its users, publish
    memoryctl keys create --agent A --scopes curate    # one agent: the owner's controls (design §13)
    memoryctl keys list [--json]
    memoryctl keys revoke KEY_ID
    memoryctl keys token --agent A --user U [--session S] [--ttl 3600] [--kid K]

A key is shown once, when it is created; the store keeps its SHA-256 digest. ``token`` signs a
user-bound token with a secret of ``MEMORY_API_TOKEN_SECRETS``, as a platform's backend does.
"""

from __future__ import annotations

import argparse
import json
import sys

from ops.commands import positive_int


def _store():
    from ops.stores import open_existing
    from schemas.settings import get_settings

    return open_existing(get_settings())


def _create(args: argparse.Namespace) -> int:
    from usecases.keys import create_key
    from pipeline.clock import Clock

    store = _store()
    try:
        scopes = args.scopes.split(",") if args.scopes is not None else None
        secret, key = create_key(store.access, "admin" if args.admin else "agent", Clock().now(), agent_id=args.agent,
                                 label=args.label, scopes=scopes)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"key_id": key.key_id, "kind": key.kind, "agent_id": key.agent_id, "scopes": key.scopes,
                          "secret": secret}, sort_keys=True))
        return 0
    reach = "every agent" if key.kind == "admin" else f"agent {key.agent_id} ({', '.join(key.scopes)})"
    print(f"{key.kind} key {key.key_id} for {reach} (shown once; the store keeps its digest):", file=sys.stderr)
    print(secret)
    return 0


def _list(args: argparse.Namespace) -> int:
    from schemas.access import KEY_SCOPES

    store = _store()
    try:
        keys = store.access.list_api_keys()
    finally:
        store.close()
    rows = [{"key_id": k.key_id, "kind": k.kind, "agent_id": k.agent_id, "label": k.label,
             "scopes": list(KEY_SCOPES) if k.kind == "admin" else k.scopes,
             "created_at": k.created_at.isoformat(), "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None}
            for k in keys]
    if args.json:
        print(json.dumps(rows, sort_keys=True))
        return 0
    for r in rows:
        state = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        scopes = ",".join(r["scopes"])
        print(f"{r['key_id']}  {r['kind']:<5}  {r['agent_id'] or '*':<20}  {scopes:<20}  {state:<40}  "
              f"{r['label'] or ''}".rstrip())
    if not rows:
        print("no keys (memoryctl keys create --admin)", file=sys.stderr)
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from usecases.keys import revoke_key
    from pipeline.clock import Clock

    store = _store()
    try:
        key = revoke_key(store.access, args.key_id, Clock().now())
    finally:
        store.close()
    if args.json:
        print(json.dumps({"key_id": key.key_id, "revoked_at": key.revoked_at.isoformat()}, sort_keys=True))
    else:
        print(f"revoked {key.key_id} at {key.revoked_at.isoformat()}")
    return 0


def _token(args: argparse.Namespace) -> int:
    from ops.commands.serve import api_settings, require_api_extra
    from pipeline.errors import ConfigurationError

    require_api_extra()
    from usecases.tokens import issue_user_token

    settings = api_settings()
    secrets = settings.token_secrets
    if not secrets:
        raise ConfigurationError("MEMORY_API_TOKEN_SECRETS is empty: set it to {\"<kid>\": \"<secret>\"}")
    kid = args.kid or sorted(secrets)[-1]
    if kid not in secrets:
        raise ConfigurationError(f"--kid {kid!r} is not in MEMORY_API_TOKEN_SECRETS ({', '.join(sorted(secrets))})")
    if args.ttl > settings.token_max_lifetime_s:
        raise ConfigurationError(f"--ttl {args.ttl} is above MEMORY_API_TOKEN_MAX_LIFETIME_S "
                                 f"({settings.token_max_lifetime_s}); the API would refuse the token")
    token = issue_user_token(secrets[kid].get_secret_value(), kid, agent_id=args.agent, user_id=args.user,
                             session_id=args.session, lifetime_s=args.ttl)
    print(json.dumps({"token": token, "kid": kid, "ttl_s": args.ttl}, sort_keys=True) if args.json else token)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keys", help="create, list and revoke API keys; sign a user-bound token")
    keys = p.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = keys.add_parser("create", help="a new key, printed once")
    kind = create.add_mutually_exclusive_group(required=True)
    kind.add_argument("--admin", action="store_true", help="an admin key: every agent, admin routes")
    kind.add_argument("--agent", help="an agent key for this agent: read any of its users, publish")
    create.add_argument("--scopes", help="an agent key's scopes, comma-separated among read, publish, curate "
                        "(default read,publish: the runtime's; curate: instructions, pause, curation)")
    create.add_argument("--label", help="a note to recognise the key by (no secret)")
    create.add_argument("--json", action="store_true", help="print the key id, kind, agent and secret as JSON")
    create.set_defaults(func=_create)
    listing = keys.add_parser("list", help="every key, without secrets")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_list)
    revoke = keys.add_parser("revoke", help="revoke a key by its id (refused from then on)")
    revoke.add_argument("key_id")
    revoke.add_argument("--json", action="store_true")
    revoke.set_defaults(func=_revoke)
    token = keys.add_parser("token", help="sign a user-bound token with MEMORY_API_TOKEN_SECRETS")
    token.add_argument("--agent", required=True)
    token.add_argument("--user", required=True)
    token.add_argument("--session")
    token.add_argument("--ttl", type=positive_int, default=3600, help="lifetime in seconds (default 3600)")
    token.add_argument("--kid", help="which secret (default: the last key id in sort order)")
    token.add_argument("--json", action="store_true", help="print the token with its kid and lifetime as JSON")
    token.set_defaults(func=_token)
