"""Live: one formation and one embedding call per provider, against the real APIs."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pipeline.embeddings import open_embedder
from tests.live.formation import assert_formed, form, live_settings, require

TEXTS = ["Alice lives in Lisbon.", "Alice's home is in Lisbon, Portugal.", "The invoice is due on Friday."]


def _similar_pair_scores_higher(vectors) -> None:
    v = np.array(vectors)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]


# --- OpenAI ----------------------------------------------------------------------------------

@pytest.fixture
def openai_settings(tmp_path):
    keys = require("OPENAI_API_KEY", why="the OpenAI formation and embedding call")
    return live_settings(tmp_path, openai_api_key=keys["OPENAI_API_KEY"], llm_provider="openai",
                         embedding_provider="openai")


def test_openai_forms_facts_through_the_whole_chain(openai_settings, tmp_path):
    env, run = form(openai_settings, tmp_path)
    assert_formed(env, run)
    assert run.stages["extract_facts"].usage.structured_output == {"json_schema": 1}


def test_openai_embeds_a_batch_with_its_real_dimension(openai_settings):
    embedder = open_embedder(openai_settings)
    result = embedder.embed(TEXTS)
    assert result.dim == embedder.dim == len(result.vectors[0]) and result.input_tokens > 0
    _similar_pair_scores_higher(result.vectors)


# --- Gemini ----------------------------------------------------------------------------------

@pytest.fixture
def gemini_settings(tmp_path):
    keys = require("GEMINI_API_KEY|GOOGLE_API_KEY", why="the Gemini formation and embedding call")
    return live_settings(tmp_path, gemini_api_key=keys["GEMINI_API_KEY"], llm_provider="gemini",
                         embedding_provider="gemini")


def test_gemini_forms_facts_through_the_whole_chain(gemini_settings, tmp_path):
    env, run = form(gemini_settings, tmp_path)
    assert_formed(env, run)
    assert run.stages["extract_facts"].usage.structured_output == {"json_schema": 1}


def test_gemini_embeds_a_batch_with_its_real_dimension(gemini_settings):
    embedder = open_embedder(gemini_settings)
    result = embedder.embed(TEXTS)
    assert result.dim == embedder.dim == len(result.vectors[0])
    _similar_pair_scores_higher(result.vectors)


# --- an OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp) ------------------------

def test_a_compatible_server_forms_facts_in_auto_mode(tmp_path):
    found = require("MEMORY_TEST_OPENAI_BASE_URL", "MEMORY_TEST_OPENAI_MODEL",
                    why="a formation on an OpenAI-compatible server (e.g. Ollama at http://localhost:11434/v1)")
    model = found["MEMORY_TEST_OPENAI_MODEL"]
    settings = live_settings(
        tmp_path, llm_provider="openai", openai_base_url=found["MEMORY_TEST_OPENAI_BASE_URL"],
        openai_api_key=os.environ.get("MEMORY_TEST_OPENAI_API_KEY"), openai_structured_output="auto",
        openai_fast_model=model, openai_free_model=model, openai_premium_model=model,
        # local models on a CPU are slow; the offline embedder keeps this part to the LLM
        llm_timeout_fast_s=600, llm_timeout_free_s=600, llm_timeout_premium_s=600, embedding_provider="local",
    )
    env, run = form(settings, tmp_path)
    assert_formed(env, run)
    assert set(run.stages["extract_facts"].usage.structured_output) <= {"json_schema", "json_object"}
