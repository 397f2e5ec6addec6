"""Each adapter is composed of one repository per port (design §7): every method of a port is
implemented by that port's repository, in the adapter's package, so a repository can be read
and changed on its own, and a method never lands in an unrelated one."""

from __future__ import annotations

import pytest

from pipeline.store import ports
from pipeline.store.mongo import MongoStore
from pipeline.store.sqlite import SQLiteStore

PORTS = [getattr(ports, name) for name in ports.__all__ if name.endswith("Store")]
# the store class's own: they open and close what all its repositories share
LIFECYCLE = {"create_indexes", "close"}


@pytest.mark.parametrize("store_class", [SQLiteStore, MongoStore], ids=["sqlite", "mongo"])
@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_every_port_is_implemented_by_one_repository_of_each_adapter(store_class, port):
    package = store_class.__module__.rsplit(".", 1)[0]
    repositories = [klass for klass in store_class.__mro__[1:]
                    if port in klass.__bases__ and klass.__module__.startswith(f"{package}.")]
    assert len(repositories) == 1, f"{store_class.__name__}: {port.__name__} is implemented by {repositories}"
    (repository,) = repositories
    abstract = {name for name, value in vars(port).items() if getattr(value, "__isabstractmethod__", False)}
    missing = sorted(name for name in abstract - set(vars(repository))
                     if not (name in LIFECYCLE and name in vars(store_class)))
    assert not missing, f"{repository.__name__} leaves {missing} of {port.__name__} to other classes"
