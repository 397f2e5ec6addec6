"""The shipped per-model search defaults are the benchmarked ones, and settings only override."""

import json
import re

import pytest

from pipeline.embeddings.local import MODEL_NAME as LOCAL_MODEL
from pipeline.errors import InvalidInput
from pipeline.retrieval import Thresholds
from pipeline.search.defaults import MODEL_DEFAULTS
from schemas.settings import Settings

#: the table as benchmarked (docs/benchmarks.md "Retrieval choices (LoCoMo)"); a change to MODEL_DEFAULTS must
#: change this line and come with a new figure in the entry's evidence
BENCHMARKED = {LOCAL_MODEL: {"rrf_k": 10}, "multilingual-e5-small-q4": {"rrf_k": 5, "semantic": 0.9}}


def test_the_shipped_table_is_the_benchmarked_one():
    assert {model: dict(entry.values) for model, entry in MODEL_DEFAULTS.items()} == BENCHMARKED


@pytest.mark.parametrize("model", sorted(MODEL_DEFAULTS))
def test_every_entry_names_its_benchmark_and_figures(model):
    evidence = MODEL_DEFAULTS[model].evidence
    assert "python -m bench." in evidence
    assert re.search(r"recall@10 0\.\d{3}", evidence)


def test_the_local_model_gets_its_measured_rrf_k_without_any_setting():
    limits, origin = Thresholds.resolve(Settings(), LOCAL_MODEL)
    assert limits.rrf_k == 10
    assert origin["rrf_k"] == f"shipped default for {LOCAL_MODEL}"
    assert origin["semantic"] == "global default"


def test_a_model_without_an_entry_gets_the_global_defaults():
    limits = Thresholds.from_settings(Settings(), "text-embedding-3-small")
    assert (limits.rrf_k, limits.semantic, limits.text) == (60, 0.65, 1.5)


def test_an_explicit_global_setting_wins_over_the_table(monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH_RRF_K", "30")
    limits, origin = Thresholds.resolve(Settings(), LOCAL_MODEL)
    assert limits.rrf_k == 30
    assert origin["rrf_k"] == "MEMORY_SEARCH_RRF_K"


def test_search_by_model_overrides_everything(monkeypatch):
    monkeypatch.setenv("MEMORY_SEARCH_RRF_K", "30")
    monkeypatch.setenv("MEMORY_SEARCH_BY_MODEL", json.dumps({LOCAL_MODEL: {"rrf_k": 20, "semantic": 0.7}}))
    limits, origin = Thresholds.resolve(Settings(), LOCAL_MODEL)
    assert (limits.rrf_k, limits.semantic) == (20, 0.7)
    assert origin["rrf_k"] == origin["semantic"] == f"MEMORY_SEARCH_BY_MODEL[{LOCAL_MODEL}]"


def test_an_unknown_override_key_is_refused_with_its_name():
    settings = Settings(search_by_model={LOCAL_MODEL: {"rrfk": 20}})
    with pytest.raises(InvalidInput, match="rrfk"):
        Thresholds.from_settings(settings, LOCAL_MODEL)
