"""The offline embedders side by side, for ``bench.search --embedders``: one query's embedding
time (p50/p95, per thread count), a formation batch's throughput, and the memory each model
adds to the process. Used by ``bench.search``, which adds search p95 at 100k facts with and
without the query's embedding.

Queries are LoCoMo's questions; the formation batch is 64 retrieval-text-sized turns (a turn
with the two before it), what ``embed_facts`` embeds for a busy session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from bench.locomo_retrieval import MODELS, conversation_turns
from bench.search import _pct
from pipeline.embeddings.port import Embedder
from testkit.procstat import rss_mb

#: a formation batch: the texts of one busy session's embed_facts call
BATCH = 64
#: query thread counts measured for e5 (its OpenMP engine); MiniLM's onnxruntime runs its own two
E5_THREADS = (1, 2)


def texts_of(conversations: list[dict], n_questions: int) -> tuple[list[str], list[str]]:
    """``n_questions`` questions, and one formation batch of turns with their excerpt."""
    questions = [q["question"] for c in conversations for q in c["qa"]][:n_questions]
    turns = [text for c in conversations[:1] for _, _, text, _ in conversation_turns(c["conversation"])]
    return questions, turns[:BATCH]


def _query_ms(embedder: Embedder, questions: list[str]) -> list[float]:
    embedder.embed_queries(questions[:3])  # warm: first calls page the weights in
    out = []
    for q in questions:
        t = time.perf_counter()
        embedder.embed_queries([q])
        out.append((time.perf_counter() - t) * 1000)
    return out


def _batch_rate(embedder: Embedder, batch: list[str], rounds: int = 3) -> float:
    t = time.perf_counter()
    for _ in range(rounds):
        embedder.embed(batch)
    return round(rounds * len(batch) / (time.perf_counter() - t), 1)


def _open(model: str, threads: int | None) -> Embedder:
    if model == "multilingual-e5-small-q4":
        from pipeline.embeddings.e5 import E5Embedder

        return E5Embedder(query_threads=threads or 2, batch_threads=threads or 2)
    from pipeline.embeddings.local import LocalEmbedder

    return LocalEmbedder()


def timings(questions: list[str], batch: list[str], models: Sequence[str] = MODELS) -> dict:
    """Per model: RSS the model added, query ms per thread count, batch texts/s per thread count."""
    out: dict = {}
    for model in models:
        before = rss_mb(os.getpid()) or 0.0
        embedder = _open(model, None)
        entry: dict = {"rss_added_mb": round((rss_mb(os.getpid()) or 0.0) - before, 1)}
        if model == "multilingual-e5-small-q4":
            samples = {}
            for threads in E5_THREADS:
                tuned = _open(model, threads)
                samples[threads] = _query_ms(tuned, questions)
                entry[f"query_ms_threads_{threads}"] = _pct(samples[threads])
                entry[f"batch_texts_per_s_threads_{threads}"] = _batch_rate(tuned, batch)
            entry["query_samples_ms"] = samples[2]  # the shipped MEMORY_E5_QUERY_THREADS
        else:
            entry["query_samples_ms"] = _query_ms(embedder, questions)
            entry["query_ms_threads_2"] = _pct(entry["query_samples_ms"])
            entry["batch_texts_per_s_threads_2"] = _batch_rate(embedder, batch)
        entry["rss_after_use_mb"] = round(rss_mb(os.getpid()) or 0.0, 1)
        out[model] = entry
    return out


def with_embedding(search_samples: Sequence[float], query_samples: Sequence[float]) -> dict[str, float]:
    """Search plus the query's embedding: each search time plus one measured embedding time."""
    paired = [s + query_samples[i % len(query_samples)] for i, s in enumerate(search_samples)]
    return _pct(paired)
