"""A deterministic hashing embedder for tests: feature hashing of words and character n-grams.

It is lexical, not semantic: texts that share words and spellings score high, paraphrases
with different words do not. Use the local model (``pipeline.embeddings.local``) for meaning.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.llm.answers import estimate_usage_tokens

_WORD = re.compile(r"\w+", re.UNICODE)
_NGRAM = 3
_WORD_WEIGHT = 2.0


class HashingEmbedder(Embedder):
    provider = "hashing"
    #: hashing reads every word; a window keeps its retrieval texts as bounded as a model's
    window = 8192

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError(f"hashing embedder: dim must be at least 8, got {dim}")
        self.dim = dim
        self.model = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> Embeddings:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(text):
                index, sign = self._bucket(feature)
                vectors[row, index] += sign * weight
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return Embeddings(
            vectors=vectors.tolist(), model=self.model, dim=self.dim,
            input_tokens=sum(estimate_usage_tokens(t) for t in texts),
        )

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0


def _features(text: str) -> list[tuple[str, float]]:
    words = _WORD.findall(text.lower())
    features = [(f"w:{w}", _WORD_WEIGHT) for w in words]
    for word in words:
        padded = f"<{word}>"
        features.extend((f"c:{padded[i:i + _NGRAM]}", 1.0) for i in range(max(1, len(padded) - _NGRAM + 1)))
    return features
