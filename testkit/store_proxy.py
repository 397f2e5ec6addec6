"""The real store seen through a test's hand: every method of every repository
(``store.facts.insert_fact``, ``store.runs.finish_run`` ...) is handed to ``intercept(name,
method)``, whose return is called instead. What a test counts, fails or delays so goes through
the store the code under test holds, whichever repository the method is on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.store.port import REPOSITORIES

Intercept = Callable[[str, Callable[..., Any]], Callable[..., Any]]


class StoreProxy:
    """The store, its repositories wrapped (``RepositoryProxy``); the rest passed through."""

    def __init__(self, store, intercept: Intercept) -> None:
        self._store = store
        self._intercept = intercept

    def __getattr__(self, name: str):
        found = getattr(self._store, name)
        return RepositoryProxy(found, self._intercept) if name in REPOSITORIES else found


class RepositoryProxy:
    def __init__(self, repository, intercept: Intercept) -> None:
        self._repository = repository
        self._intercept = intercept

    def __getattr__(self, name: str):
        found = getattr(self._repository, name)
        return self._intercept(name, found) if callable(found) else found
