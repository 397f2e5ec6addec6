from __future__ import annotations

import pytest

from testkit.formation import Env, make_env
from testkit.webhook_receiver import Receiver


@pytest.fixture
def env(tmp_path) -> Env:
    e = make_env(tmp_path)
    yield e
    e.store.close()


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()
