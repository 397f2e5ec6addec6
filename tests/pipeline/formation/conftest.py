"""Stage tests run on hand-written fakes of every port (see ``testkit.formation.make_env``)."""

from __future__ import annotations

import pytest

from testkit.formation import Env, make_env


@pytest.fixture
def env(tmp_path) -> Env:
    e = make_env(tmp_path)
    yield e
    e.store.close()
