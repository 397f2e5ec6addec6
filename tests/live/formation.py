"""Live-suite helpers: the skip line of a missing variable, and one formation through the real
chain of stages, in process, on SQLite, with real providers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.clock import FrozenClock
from pipeline.embeddings import open_embedder
from pipeline.llm import open_llm
from pipeline.search.local import LocalFactSearch
from pipeline.store.sqlite import SQLiteStore
from schemas.documents import FormationRun
from schemas.settings import Settings
from testkit.formation import Env

CHAT = [
    ("user", "u-1", "Hi, I'm Alice Moreau. My work email is alice.moreau@example.com."),
    ("assistant", None, "Nice to meet you, Alice. Noted."),
    ("user", "u-1", "Our team launches the Orion beta on 2027-03-15 in Lisbon, and I lead the launch."),
    ("assistant", None, "Great, I'll keep that in mind."),
    ("user", "u-1", "Please always answer me in short bullet points."),
    ("assistant", None, "Will do."),
]


def live_settings(tmp_path: Path, **providers) -> Settings:
    """Settings for a live formation: SQLite in ``tmp_path``, no Redis, the given providers."""
    base = dict(_env_file=None, store_url=f"sqlite:///{tmp_path / 'live.db'}", broker_url="memory://",
                openai_api_key=None, gemini_api_key=None, openai_base_url=None, gemini_base_url=None)
    return Settings(**{**base, **providers})


def form(settings: Settings, tmp_path: Path) -> tuple[Env, FormationRun]:
    """Run ``CHAT`` through extract_facts -> ... -> finish; return the env and the finished run."""
    store = SQLiteStore(str(tmp_path / "live.db"))
    store.create_indexes()
    env = Env(settings, store, open_llm(settings), open_embedder(settings), LocalFactSearch(store), FrozenClock())
    env.agent()
    run_id = env.new_run(CHAT, reason="session_end")
    env.whole_chain(run_id)
    run = store.runs.get_run(run_id)
    assert run is not None
    return env, run


def assert_formed(env: Env, run: FormationRun) -> None:
    """What any working provider must give for ``CHAT``: a done run, facts with vectors of the
    embedder's size, tokens and the structured-output mode recorded."""
    errors = {name: record.error for name, record in run.stages.items() if record.error}
    assert run.status == "done", f"run {run.run_id} ended {run.status}: {errors}"
    facts = env.live_facts()
    assert facts, "the model extracted no fact from a chat holding a name, an email and a date"
    assert {f.embedding_model for f in facts} == {env.embedder.model}
    extract = run.stages["extract_facts"]
    assert extract.usage.calls >= 1 and extract.usage.input_tokens > 0
    assert extract.usage.structured_output, "the structured-output mode was not recorded"
    assert run.stages["embed_facts"].output["dim"] == env.embedder.dim


def require(*names: str, why: str) -> dict[str, str]:
    """The values of ``names`` (the first of alternatives joined by '|'), or skip with one line."""
    values: dict[str, str] = {}
    for name in names:
        options = name.split("|")
        value = next((os.environ[o] for o in options if os.environ.get(o)), None)
        if not value:
            pytest.skip(f"set {' or '.join(options)} to run {why}")
        values[options[0]] = value
    return values
