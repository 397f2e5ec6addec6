"""The erasure's plan is its result: on the store ``make demo`` forms, for each of its people
(under the agent and under every agent), ``preview_forget`` counts what ``forget_user`` then
reports, category by category, and changes nothing itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.forgetting import forget_user, preview_forget
from pipeline.llm.offline import OfflineLLM
from pipeline.store.sqlite import SQLiteStore
from schemas.settings import Settings
from testkit.demo_store import AGENT, formed_demo_store

DATA = Path(__file__).resolve().parents[2] / "ops" / "demo_data" / "launch_planning.jsonl"
PEOPLE = sorted({e["message"]["sender_id"] for e in map(json.loads, DATA.read_text().splitlines())
                 if e.get("type") == "message.added" and e["message"]["role"] == "user"})


@pytest.fixture
def demo_copy(tmp_path_factory, tmp_path):
    formed = formed_demo_store(tmp_path_factory)
    for suffix in ("", "-wal"):
        if Path(f"{formed}{suffix}").exists():
            shutil.copy(f"{formed}{suffix}", tmp_path / f"demo.db{suffix}")
    store = SQLiteStore(str(tmp_path / "demo.db"))
    yield store, Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'demo.db'}")
    store.close()


def test_the_demo_has_a_group_chat_and_one_to_one_sessions():
    assert len(PEOPLE) >= 3, PEOPLE


@pytest.mark.parametrize("agent", [AGENT, None], ids=["one-agent", "every-agent"])
@pytest.mark.parametrize("person", PEOPLE)
def test_the_plan_counts_what_the_erasure_then_reports(demo_copy, person, agent):
    store, settings = demo_copy
    before = store.admin.dump_all()
    planned = preview_forget(store, person, agent)
    assert store.admin.dump_all() == before, "planning changed the store"
    done = forget_user(store, person, agent, settings=settings, llm=OfflineLLM(settings))
    assert planned.counts == done.counts
    assert sum(planned.counts.values()) > 0
    assert sorted({(r.agent_id, r.scope_key) for r in planned.plan.rebuild} | set(planned.plan.drop_blobs)) == \
        done.blob_keys
