"""How a door tells an API key from a user-bound token: keys read ``mk_<key id>_<secret>``
(``usecases.keys`` makes, lists and revokes them)."""

from __future__ import annotations

from usecases.keys import PREFIX


def looks_like_key(credential: str) -> bool:
    return credential.startswith(PREFIX)
