"""Fact search: one port, the implementation chosen by the store (design §7).

- Mongo store with ``MEMORY_ATLAS_SEARCH=true``: ``AtlasFactSearch`` ($vectorSearch, $search);
- otherwise (SQLite, plain MongoDB): ``LocalFactSearch``, exact and in-process.
"""

from __future__ import annotations

from pipeline.search.port import FactSearch, Hit
from pipeline.store.port import Store
from schemas.settings import Settings

__all__ = ["FactSearch", "Hit", "open_search"]


def open_search(store: Store, settings: Settings) -> FactSearch:
    if settings.atlas_search and hasattr(store, "col"):
        from pipeline.search.atlas import AtlasFactSearch

        return AtlasFactSearch.from_store(store)
    from pipeline.search.local import LocalFactSearch

    return LocalFactSearch(
        store, blas_threads=settings.search_blas_threads, cache_mb=settings.search_cache_mb,
        scan_threads=settings.search_scan_threads, segment_dir=settings.search_segment_dir,
    )
