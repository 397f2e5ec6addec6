"""Local fact search for SQLite and plain MongoDB (design §7): exact cosine and BM25 in-process.

The candidates of one (agent, scope key, embedding model) are loaded once through
``Store.search_candidates`` into a *segment* (``pipeline.search.segment``: unit vectors, exact
in float32 or scanned in int8 and rescored in float32 when big, and a flat inverted index
whose typo tolerance is computed at query time). Segments are cached in-process, up to
``MEMORY_SEARCH_CACHE_MB`` of memory (least recently used go first), one build per segment
at a time, and rebuilt as soon as the scope's version stamp moves (``Store.get_scope_versions``), so a
formation, a retirement or an erasure is seen by the next search. A search over several
scope keys (agent + user) scores every segment and merges; BM25 statistics are those of the
union of the segments, i.e. of exactly the pre-filtered candidates.

A rebuild of a big segment (>= ``BACKGROUND_REBUILD_MIN`` facts, seconds at 100k) runs in the
background while the stale segment keeps answering, so a formation never stalls a search;
hits are always re-read from the store by ``search_facts``, which drops any fact retired,
erased or out of scope meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from pipeline.search import scoring
from pipeline.search.port import FactSearch, Hit
from pipeline.search.segment import QUANTIZE_MIN, Segment
from pipeline.search.segment_files import SegmentFiles
from pipeline.store.port import FactStore, LeaseStore

#: memory the cached segments of one process may hold (least recently used goes first)
DEFAULT_CACHE_MB = 512
#: a stale segment at least this big keeps serving while it is rebuilt in the background
#: (a rebuild costs seconds at 100k facts); smaller ones are rebuilt before answering
BACKGROUND_REBUILD_MIN = 20_000

log = logging.getLogger("memory.search")


class SegmentSource(Protocol):
    """What the local search reads: the candidate facts of a scope key, and the scope stamps
    that say when a segment built from them is stale."""

    facts: FactStore
    leases: LeaseStore


class LocalFactSearch(FactSearch):
    """Exact, vectorized search over the store's pre-filtered candidates."""

    def __init__(
        self, store: SegmentSource, *, cache: bool = True, cache_mb: float = DEFAULT_CACHE_MB,
        background_min: int = BACKGROUND_REBUILD_MIN, blas_threads: int | None = 1,
        quantize_min: int = QUANTIZE_MIN, scan_threads: int = 1, segment_dir: str | None = None,
    ) -> None:
        if blas_threads is not None:
            _limit_blas_threads(blas_threads)
        self._store = store
        self._cache_enabled = cache
        self._cache_bytes = int(cache_mb * 1024 * 1024)
        self._held_bytes = 0
        self._quantize_min = quantize_min
        #: threads of one int8 scan (``bench.search_scan``: 1 unless the host's cores are idle)
        self._scan_threads = scan_threads
        #: segments as files mapped by every process of the machine (``segment_files``)
        self._files = SegmentFiles(segment_dir) if segment_dir else None
        self._segments: OrderedDict[tuple[str, str, str | None], tuple[tuple[int, int], Segment]] = OrderedDict()
        self._lock = threading.Lock()
        self._build_locks: dict[tuple[str, str, str | None], threading.Lock] = {}
        self._refreshing: set[tuple[str, str, str | None]] = set()
        self._background_min = background_min
        self._warned_over = False
        self._epoch = 0

    # ----------------------------------------------------------------- segments ------------
    def _segment(
        self, agent_id: str, key: str, model: str | None, stamp: tuple[int, int], *, any_model: bool = False,
        pinned: frozenset[tuple[str, str]] = frozenset(),
    ) -> Segment:
        """The scope's segment at ``stamp``. ``any_model``: text search needs every live fact,
        which a segment of any model holds. A big stale segment keeps serving while its
        successor is built in the background (hits are re-read from the store, so a retired
        or erased fact never shows); small ones are rebuilt at once. ``pinned``: the (agent,
        scope key) pairs the calling search reads, which a build must not evict."""
        with self._lock:
            held_keys = sorted(
                (ck for ck in self._segments if ck[0] == agent_id and ck[1] == key and (any_model or ck[2] == model)),
                key=lambda ck: ck[2] != model,
            )
            for ck in held_keys:
                if self._segments[ck][0] == stamp:
                    self._segments.move_to_end(ck)
                    return self._segments[ck][1]
            stale_key = held_keys[0] if held_keys else None
            if stale_key is not None and self._segments[stale_key][1].size >= self._background_min:
                if stale_key not in self._refreshing:
                    self._refreshing.add(stale_key)
                    threading.Thread(
                        target=self._refresh, args=(stale_key, stamp, pinned), name="segment-refresh", daemon=True,
                    ).start()
                return self._segments[stale_key][1]
            cache_key = stale_key or (agent_id, key, model)
        with self._build_lock(cache_key):  # one build per segment, even when many threads miss at once
            with self._lock:
                held = self._segments.get(cache_key)
                if held is not None and held[0] == stamp:
                    return held[1]
            return self._build(cache_key, stamp, pinned)

    def _build(
        self, cache_key: tuple[str, str, str | None], stamp: tuple[int, int], pinned: frozenset[tuple[str, str]],
    ) -> Segment:
        agent_id, key, model = cache_key

        def build() -> Segment:
            return Segment.build(
                self._store.facts.search_candidates(agent_id, [key], model), model, quantize_min=self._quantize_min,
            )

        if self._files is None:
            segment = build()
        else:
            segment = self._files.load_or_build(
                agent_id, key, model, stamp, build, lambda held: self._holds_store_facts(held, agent_id, key),
            )
        if self._cache_enabled:
            with self._lock:
                previous = self._segments.pop(cache_key, None)
                if previous is not None:
                    self._held_bytes -= previous[1].nbytes
                self._segments[cache_key] = (stamp, segment)
                self._held_bytes += segment.nbytes
                # least recently used first. The segment just built and the others of the
                # search that needs it stay, even over the bound: evicting one of them would
                # rebuild it on the next search, and then evict its sibling (at 1M facts, a
                # rebuild per search)
                keep = pinned | {(agent_id, key)}
                for ck in [ck for ck in self._segments if (ck[0], ck[1]) not in keep]:
                    if self._held_bytes <= self._cache_bytes:
                        break
                    _, evicted = self._segments.pop(ck)
                    self._held_bytes -= evicted.nbytes
                if self._held_bytes > self._cache_bytes and not self._warned_over:
                    self._warned_over = True
                    log.warning(
                        "one search needs %.0f MB of search segments, over MEMORY_SEARCH_CACHE_MB=%.0f: "
                        "they are kept; raise the setting to leave room for other agents' segments",
                        self._held_bytes / 2**20, self._cache_bytes / 2**20,
                    )
        return segment

    def _holds_store_facts(self, segment: Segment, agent_id: str, key: str) -> bool:
        """Whether a segment file found for the current stamps was built from this store: as
        many facts as the scope holds live, its first and last of them live there (a store
        recreated at the same path counts its stamps again, with other fact ids)."""
        if segment.size != self._store.facts.count_facts(agent_id, key):
            return False
        if segment.size == 0:
            return True
        ends = {segment.ids[0], segment.ids[segment.size - 1]}
        found = self._store.facts.get_facts(sorted(ends))
        return len(found) == len(ends) and all(
            f.agent_id == agent_id and f.scope_key == key and f.retired_at is None for f in found
        )

    def held_bytes(self) -> int:
        """Memory the cached segments hold, by ``Segment.nbytes`` (benchmarks and tests)."""
        with self._lock:
            return self._held_bytes

    def _refresh(
        self, cache_key: tuple[str, str, str | None], stamp: tuple[int, int], pinned: frozenset[tuple[str, str]],
    ) -> None:
        try:
            with self._build_lock(cache_key):  # never two builds of one segment at once
                with self._lock:
                    held = self._segments.get(cache_key)
                    if held is not None and held[0] == stamp:
                        return
                self._build(cache_key, stamp, pinned)
        except Exception:  # the stale segment keeps serving; the next search tries again
            log.exception("rebuilding the search segment %s failed", cache_key)
        finally:
            with self._lock:
                self._refreshing.discard(cache_key)

    def _build_lock(self, cache_key: tuple[str, str, str | None]) -> threading.Lock:
        with self._lock:
            return self._build_locks.setdefault(cache_key, threading.Lock())

    def wait_for_refreshes(self, timeout_s: float = 60.0) -> bool:
        """Block until no background rebuild runs (benchmarks and tests). False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._refreshing:
                    return True
            time.sleep(0.01)
        return False

    def _segments_for(
        self, agent_id: str, scope_keys: Sequence[str], model: str | None, any_model: bool,
    ) -> list[tuple[str, Segment]]:
        """Each scope key's segment at its current stamp, with the key."""
        keys = list(dict.fromkeys(scope_keys))
        if not keys:
            return []
        stamps = self._store.leases.get_scope_versions(agent_id, list(dict.fromkeys([*keys, "agent"])))
        epoch = self._store.leases.stamps_epoch()
        if epoch != self._epoch:  # another store's data now: its stamps may repeat the old ones
            self.clear()
            self._epoch = epoch
        pinned = frozenset((agent_id, k) for k in keys)
        return [
            (k, self._segment(agent_id, k, model, _token(k, stamps), any_model=any_model, pinned=pinned)) for k in keys
        ]

    def _mask(self, agent_id: str, key: str, segment: Segment, having: Sequence[Sequence[str]]) -> np.ndarray | None:
        """The segment's rows a filter lets through (None: no filter), from the store's label
        index, kept on the segment: the stamp that renews a segment also moves on every change
        of a fact's labels (formation, an edit, a retirement), so a segment's masks live as
        long as it does. A fact re-filed in between is still checked on the hit itself."""
        if not having:
            return None
        return segment.mask_for(having, lambda: self._store.facts.labelled_fact_ids(agent_id, [key], having))

    def clear(self) -> None:
        with self._lock:
            self._segments.clear()
            self._held_bytes = 0

    # ----------------------------------------------------------------- semantic ------------
    def semantic(
        self, agent_id: str, scope_keys: Sequence[str], embedding_model: str,
        vector: Sequence[float], limit: int, min_score: float | None, *, having: Sequence[Sequence[str]] = (),
    ) -> list[Hit]:
        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        if norm == 0 or limit <= 0:
            return []
        query = query / norm
        pools: list[tuple[np.ndarray, np.ndarray, Segment]] = []
        for key, segment in self._segments_for(agent_id, scope_keys, embedding_model, any_model=False):
            if segment.dim != query.shape[0] or not segment.has_vector.any():
                continue  # another model's dimension: never compared
            mask = self._mask(agent_id, key, segment, having)
            rows, cosines = segment.cosines(query, limit, self._scan_threads, mask)
            scores = scoring.semantic_score(cosines)
            top = _top(scores, limit, 0.0 if min_score is None else min_score)
            pools.append((rows[top], scores[top], segment))
        return _merge(pools, limit)

    # ----------------------------------------------------------------- text ----------------
    def text(
        self, agent_id: str, scope_keys: Sequence[str], query: str, limit: int,
        min_score: float | None, *, having: Sequence[Sequence[str]] = (),
    ) -> list[Hit]:
        terms = list(dict.fromkeys(scoring.tokenize(query)))
        if not terms or limit <= 0:
            return []
        keyed = self._segments_for(agent_id, scope_keys, None, any_model=True)
        segments = [segment for _, segment in keyed]
        n_docs = sum(s.size for s in segments)
        if n_docs == 0:
            return []
        avg_len = float(sum(float(s.text.doc_len.sum()) for s in segments)) / n_docs
        # the threshold means the same at every store size (scoring.text_threshold_scale)
        floor = None if min_score is None else min_score / scoring.text_threshold_scale(n_docs)
        # every query term's matching vocabulary, per segment, then df over the union
        matches = [[s.text.matches(t) for s in segments] for t in terms]
        doc_freq: dict[str, int] = Counter()
        for index, segment in enumerate(segments):
            for term in {term for per_term in matches for term in per_term[index]}:
                doc_freq[term] += segment.text.doc_freq(term)
        pools: list[tuple[np.ndarray, np.ndarray, Segment]] = []
        for index, (key, segment) in enumerate(keyed):
            total = np.zeros(segment.size, dtype=np.float32)
            for per_term in matches:
                found = per_term[index]
                if not found:
                    continue
                # a query term counts once per document: its best-matching variant
                best = np.zeros(segment.size, dtype=np.float32)
                for term, weight in found.items():
                    docs, tfs = segment.text.postings(term)
                    idf = scoring.bm25_idf(n_docs, doc_freq[term])
                    contrib = weight * scoring.bm25_term_score(tfs, segment.text.doc_len[docs], avg_len, idf)
                    np.maximum.at(best, docs, contrib.astype(np.float32))
                total += best
            mask = self._mask(agent_id, key, segment, having)
            if mask is not None:
                total[~mask] = 0  # BM25's statistics stay the whole segments', as Atlas's are its index's
            touched = np.flatnonzero(total > 0)
            if touched.size == 0:
                continue
            top = touched[_top(total[touched], limit, floor)]
            pools.append((top, total[top], segment))
        return _merge(pools, limit)


_blas_limited = False


def _limit_blas_threads(threads: int) -> None:
    """One BLAS thread per search: a matrix-vector product is memory-bound, and on a busy
    host a second BLAS thread waits for a core more than it helps (100k x 384 measured at
    13 ms with one thread against 22-44 ms with two on a loaded 2-core machine). Concurrent
    searches run in parallel threads instead. Process-wide, applied once."""
    global _blas_limited
    if _blas_limited:
        return
    _blas_limited = True
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own default
        return
    threadpool_limits(threads, user_api="blas")


def _token(key: str, stamps: dict[str, int]) -> tuple[int, int]:
    """A segment's validity: its own stamp, and for user scopes also the agent's stamp, which
    an erasure moves (a user's stamp is dropped on erasure and may count up to old values)."""
    return int(stamps.get(key, 0)), int(stamps.get("agent", 0)) if key != "agent" else 0


def _top(scores: np.ndarray, limit: int, min_score: float | None) -> np.ndarray:
    """Indices of the ``limit`` best scores passing ``min_score`` (unordered)."""
    if min_score is not None:
        candidates = np.flatnonzero(scores >= min_score)
        scores_c = scores[candidates]
    else:
        candidates = np.arange(scores.shape[0])
        scores_c = scores
    if candidates.size > limit:
        part = np.argpartition(-scores_c, limit - 1)[:limit]
        candidates = candidates[part]
    return candidates


def _merge(pools: list[tuple[np.ndarray, np.ndarray, Segment]], limit: int) -> list[Hit]:
    rows: list[tuple[float, float, str]] = []
    for indices, scores, segment in pools:
        for i, s in zip(indices.tolist(), scores.tolist()):
            rows.append((s, segment.formed_at[i], segment.ids[i]))
    rows.sort(key=lambda r: (-r[0], -r[1], r[2]))  # best, then newest, then id
    return [Hit(fact_id, float(score)) for score, _, fact_id in rows[:limit]]
