"""Waiting for real processes to finish their work, however loaded the machine is.

A fixed wall-clock deadline fails a pipeline that is only slow (another job on the cores
stretches every stage), and a fixed sleep passes one that is not done yet. ``settle`` waits
on the pipeline's own state instead: it goes on while that state keeps changing, and gives
up once it has stood still for ``quiet_s`` without being done (something is stuck or lost).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Hashable

#: how long the pipeline may stand still, short of done, before it is called stuck: well past
#: the longest quiet a healthy pipeline of the tests has (a 15 s claim lease expiring, then
#: the next stale-run retry; a worker restarting on a loaded machine)
QUIET_S = 90.0


def settle(done: Callable[[], bool], state: Callable[[], Hashable], *, quiet_s: float = QUIET_S, confirm_s: float = 1.0,
           interval: float = 0.5, tick: Callable[[], None] | None = None, cap_s: float = 1800.0) -> bool:
    """True once ``done()`` holds at two polls ``confirm_s`` or more apart with the same
    ``state()`` at both (work that ended or began between them changes one or the other);
    False once ``state()`` has not changed for ``quiet_s`` while not done, or after ``cap_s``.
    ``tick()`` runs before every poll (a harness playing beat sends its tasks there); at each
    poll ``state()`` is read before ``done()``."""
    started = changed_at = time.monotonic()
    last = None
    done_since: tuple[float, Hashable] | None = None
    while True:
        if tick is not None:
            tick()
        now = time.monotonic()
        current = state()
        if current != last:
            last, changed_at = current, now
        if done():
            if done_since is None or done_since[1] != current:
                done_since = (now, current)
            elif now - done_since[0] >= confirm_s:
                return True
        else:
            done_since = None
        if now - changed_at > quiet_s or now - started > cap_s:
            return False
        time.sleep(interval)


def store_state(store) -> str:
    """A digest of everything the store holds: it changes with every write of the pipeline."""
    dump = json.dumps(store.admin.dump_all(), sort_keys=True, default=str)
    return hashlib.sha256(dump.encode()).hexdigest()
