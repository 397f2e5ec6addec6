"""One translation point per store adapter: the driver errors that mean "the store is not
there just now" become ``StoreUnavailable``, so the workers retry them like any transient
error instead of reading them as a bug (and recording that bug in the same dead store).

``translate_errors(translate)`` decorates an adapter's store class and each of its
repositories: the constructor, the store's lifecycle and every method of a narrow port are wrapped so that an error for which ``translate`` returns a
``StoreUnavailable`` is raised as that one (chained to the driver's error); every other error
passes through untouched. A generator method (``iter_facts_for_reembed``) is translated
while it is iterated. A public method that calls another one is translated once: a
``StoreUnavailable`` is not a driver error, so the outer wrapper lets it through.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator

from pipeline.errors import StoreUnavailable
from pipeline.store.port import REPOSITORIES

Translate = Callable[[BaseException], "StoreUnavailable | None"]

#: the narrow ports' public methods, the store's lifecycle, and the constructor (SQLite creates
#: its schema when opened, so a worker that opens its store during an outage meets it there first)
PORT_METHODS = ("__init__", "create_indexes", "close", *dict.fromkeys(
    name for port in REPOSITORIES.values() for klass in port.__mro__ if klass is not object
    for name, value in vars(klass).items() if not name.startswith("_") and callable(value)
))


@contextlib.contextmanager
def translating(translate: Translate) -> Iterator[None]:
    """Within the block, an error ``translate`` maps to a ``StoreUnavailable`` is raised as
    that one (chained to the original); others pass through untouched."""
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        unavailable = translate(exc)
        if unavailable is None:
            raise
        raise unavailable from exc


def _wrap(method: Callable, translate: Translate) -> Callable:
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def iterate(*args, **kwargs):
            with translating(translate):
                yield from method(*args, **kwargs)

        return iterate

    @functools.wraps(method)
    def call(*args, **kwargs):
        with translating(translate):
            return method(*args, **kwargs)

    return call


def translate_errors(translate: Translate):
    """Class decorator: the port methods of the class raise ``translate(exc)`` where it
    gives one."""

    def decorate(cls: type) -> type:
        for name in PORT_METHODS:
            method = getattr(cls, name, None)
            if method is None or getattr(method, "__isabstractmethod__", False):
                continue
            setattr(cls, name, _wrap(method, translate))
        return cls

    return decorate
