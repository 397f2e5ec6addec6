"""Standard Webhooks signatures (https://www.standardwebhooks.com, spec "Signature scheme").

- The signed content is ``{webhook-id}.{webhook-timestamp}.{body}``, the timestamp in integer
  seconds since the epoch, the body byte for byte as sent.
- The signature is ``v1,`` + base64 of HMAC-SHA256 over it, keyed by the secret's bytes: a
  secret is ``whsec_`` + base64 of 24 to 64 random bytes.
- ``webhook-signature`` holds several signatures separated by spaces: during a rotation each
  current secret signs, and a receiver accepts any one that verifies.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets as random

PREFIX = "whsec_"
SECRET_BYTES = 32   # the spec's range is 24 to 64 bytes


def new_secret() -> str:
    return PREFIX + base64.b64encode(random.token_bytes(SECRET_BYTES)).decode()


def secret_bytes(secret: str) -> bytes:
    """The key of a ``whsec_`` secret; ``ValueError`` for anything else."""
    if not secret.startswith(PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(PREFIX):], validate=True)
    except ValueError:
        raise ValueError("a webhook secret is whsec_ followed by base64") from None
    if not 24 <= len(key) <= 64:
        raise ValueError("a webhook secret holds 24 to 64 bytes")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of the message."""
    content = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    digest = hmac.new(secret_bytes(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secrets: list[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with every current secret."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(s, msg_id, timestamp, body) for s in secrets),
    }
