"""One pool per purpose and per process: reused across calls, made anew in a forked child
(whose parent's threads do not exist there)."""

from __future__ import annotations

import os
import select
import signal

from pipeline.threads import shared_pool


def test_the_same_pool_serves_every_call_with_the_same_threads():
    pool = shared_pool("test-pool", 2)
    first = set(pool.map(lambda _: __import__("threading").get_ident(), range(20)))
    assert shared_pool("test-pool", 2) is pool
    second = set(pool.map(lambda _: __import__("threading").get_ident(), range(20)))
    assert len(first | second) <= 2


def test_a_forked_child_gets_a_working_pool_of_its_own():
    parent = shared_pool("test-fork", 2)
    assert list(parent.map(lambda x: x + 1, [1])) == [2]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's pool object is no use here
        try:
            child = shared_pool("test-fork", 2)
            ok = child is not parent and list(child.map(lambda x: x * 2, [21])) == [42]
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 20)
    answer = os.read(read, 1) if ready else b"hung"
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert answer == b"1"
