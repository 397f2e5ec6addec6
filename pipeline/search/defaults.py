"""Search defaults per embedding model, each entry with the figure that justifies it.

A model's scores have their own scale (a cosine of 0.65 means more for one model than for
another), and how far to trust each ranked list in the fusion depends on how good the
semantic list is. So the defaults of ``schemas.settings`` are the fallback for a model
without an entry here, and an entry holds only the values that were measured for its model.

Precedence, highest first:
1. ``MEMORY_SEARCH_BY_MODEL[model]`` (an operator's override for one model);
2. a global ``MEMORY_SEARCH_*`` value the operator set explicitly (it applies to every model);
3. this table's entry for the model;
4. the global defaults.

Keys are those of ``MEMORY_SEARCH_BY_MODEL``: semantic, text, rrf_rank, rrf, rrf_k,
semantic_weight, text_weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class ModelDefaults:
    """The search values measured for one embedding model, and the measurement."""

    values: Mapping[str, float]
    #: how the values were chosen: the benchmark, its data and the figures side by side
    evidence: str


#: Every shipped per-model default. A change here must come with a new figure.
MODEL_DEFAULTS: Mapping[str, ModelDefaults] = MappingProxyType({
    # pipeline.embeddings.local.MODEL_NAME, the offline default embedder
    "all-MiniLM-L6-v2-int8": ModelDefaults(
        values=MappingProxyType({"rrf_k": 10}),
        evidence=(
            "python -m bench.locomo_retrieval --data ../shared/data/locomo/dev.json: hybrid "
            "evidence recall@10 0.772 (recall@5 0.663) at RRF k = 10 against 0.688 (0.567) at "
            "k = 60, 495 questions, retrieval texts budgeted in the model's tokens; equal signal "
            "weights were best; with the global thresholds (semantic 0.65, text 1.5 scaled to the "
            "store size, the fused cut at one signal's rank 6) recall@10 0.774, against 0.776 "
            "with the raw rrf 0.015, which never cut at this k"
        ),
    ),
    # pipeline.embeddings.e5.MODEL_NAME, the multilingual offline option (MEMORY_LOCAL_EMBEDDING_MODEL)
    "multilingual-e5-small-q4": ModelDefaults(
        values=MappingProxyType({"rrf_k": 5, "semantic": 0.9}),
        evidence=(
            "python -m bench.locomo_retrieval --data ../shared/data/locomo/dev.json (both offline "
            "models in one run, 495 questions): hybrid evidence recall@10 0.802 (recall@5 0.697) at "
            "RRF k = 5 with thresholds off, against 0.799 at k = 10 and 0.746 at k = 60; e5's cosines "
            "sit high (every non-evidence turn scores >= 0.85), so the semantic threshold is the score "
            "that passes the share of non-evidence (question, turn) pairs MiniLM passes at 0.65: 0.899 "
            "(47%); the text threshold and the fused cut in ranks are the global ones (model-free); "
            "with the global defaults (k = 60, semantic 0.65) recall@10 was 0.778"
        ),
    ),
})


def model_defaults(embedding_model: str | None) -> Mapping[str, float]:
    """The shipped values for ``embedding_model`` (empty for a model without an entry)."""
    entry = MODEL_DEFAULTS.get(embedding_model or "")
    return entry.values if entry else MappingProxyType({})
