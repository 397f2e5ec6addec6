"""Each adapter is composed of one repository per port (design §7): the store holds them as
attributes (``store.facts``, ``store.runs`` ...) and keeps only its lifecycle. Every method of a
port is implemented by that port's repository, in the adapter's package, so a repository can
be read and changed on its own, and a method never lands in an unrelated one."""

from __future__ import annotations

import pytest

from pipeline.store.mongo import MongoStore
from pipeline.store.port import REPOSITORIES
from pipeline.store.sqlite import SQLiteStore
from testkit.mongo_emulation import emulated_database

# the store class's own: they open and close what all its repositories share
LIFECYCLE = {"create_indexes", "close", "from_url"}


def _open(store_class, tmp_path):
    if store_class is SQLiteStore:
        return SQLiteStore(str(tmp_path / "memory.db"))
    return MongoStore(emulated_database())


@pytest.mark.parametrize("store_class", [SQLiteStore, MongoStore], ids=["sqlite", "mongo"])
@pytest.mark.parametrize("attr", sorted(REPOSITORIES))
def test_every_port_is_implemented_by_one_repository_of_each_adapter(store_class, attr, tmp_path):
    port = REPOSITORIES[attr]
    package = store_class.__module__.rsplit(".", 1)[0]
    store = _open(store_class, tmp_path)
    repository = type(getattr(store, attr))
    assert port in repository.__bases__ and repository.__module__.startswith(f"{package}."), repository
    abstract = {name for name, value in vars(port).items() if getattr(value, "__isabstractmethod__", False)}
    missing = sorted(abstract - set(vars(repository)))
    assert not missing, f"{repository.__name__} leaves {missing} of {port.__name__} to other classes"
    store.close()


@pytest.mark.parametrize("store_class", [SQLiteStore, MongoStore], ids=["sqlite", "mongo"])
def test_the_store_itself_has_its_lifecycle_and_repositories_and_no_port_method(store_class, tmp_path):
    store = _open(store_class, tmp_path)
    methods = {name for port in REPOSITORIES.values() for name in dir(port) if not name.startswith("_")}
    public = {name for name in dir(store) if not name.startswith("_") and name != "REPOSITORIES"}
    assert public & methods == set()
    assert set(REPOSITORIES) | LIFECYCLE <= public
    store.close()
