"""The point of withdrawing (design §13 "Owner controls"): once a person took their part out of a
shared fact, ``forget-user`` of that person verifies clean while the fact stays, word for word,
for the others, and no text of theirs is left in it. Over fact lives Hypothesis draws: versions
written from different people's messages or by edits, on every adapter."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from pipeline.forgetting import forget_user, verify_erasure
from pipeline.store.port import FactUpdate
from pipeline.text import text_hash
from pipeline.withdrawal import WithdrawRefused
from schemas.documents import FormationRun
from schemas.settings import Settings
from testkit.documents import T0, at, fact, message
from tests.pipeline.store.conftest import ADAPTERS, open_adapter
from usecases.withdraw import NotWithdrawable, WithdrawIn, withdraw

PEOPLE = ("ann", "bob", "cy")
# a version is written from one person's message, or by an edit (None)
VERSIONS = st.lists(st.sampled_from([*PEOPLE, None]), min_size=1, max_size=4).filter(lambda v: v[0] is not None)


def _text(i: int, writer: str | None) -> str:
    return f"Version {i} by an edit" if writer is None else f"Version {i} as <{writer}> said it"


def _build(store, writers: list[str | None]) -> None:
    """A shared fact whose version ``i`` was written by ``writers[i]`` (its run over their message)."""
    seq = 0
    for i, writer in enumerate(writers):
        if writer is None:
            continue
        store.ingest.ingest_message(message(i + 1, user=writer, users=list(PEOPLE), content=f"<{writer}> speaks"), at(i))
        seq += 1  # the session's ingest sequence: one per message
        store.runs.insert_run(FormationRun(run_id=f"r{i}", agent_id="a1", session_id="s1", seq_from=seq, seq_to=seq,
                                      reason="threshold", created_at=T0, status="done", user_ids=[writer]))
    store.facts.insert_fact(fact("f1", _text(0, writers[0])).model_copy(update={
        "source_message_ids": ["m1"], "source_user_ids": [writers[0]], "source_run_id": "r0",
        "source_text": f"{writers[0]}: <{writers[0]}> speaks"}))
    for i, writer in enumerate(writers[1:], 1):
        text = _text(i, writer)
        assert store.facts.update_fact("f1", FactUpdate(
            content=text, hash=text_hash(text), embedding=None, embedding_model=None,
            run_id=f"r{i}" if writer else f"edit:{i}", now=at(i),
            source_message_ids=[f"m{i + 1}"] if writer else [], source_user_ids=[writer] if writer else [],
            source_text=f"{writer}: <{writer}> speaks" if writer else ""))


@pytest.mark.parametrize("adapter", ADAPTERS)
@hsettings(max_examples=20, deadline=None)
@given(writers=VERSIONS)
def test_after_a_withdrawal_forget_user_finds_nothing_and_the_others_keep_the_fact(adapter, writers):
    with tempfile.TemporaryDirectory() as tmp:
        store = open_adapter(adapter, Path(tmp))
        try:
            store.create_indexes()
            _build(store, writers)
            [before] = store.facts.get_facts(["f1"])
            sources = set(before.source_user_ids)
            try:
                withdraw(store, WithdrawIn(agent_id="a1", user_id="ann", kind="fact", item_id="f1", now=at(60)))
            except NotWithdrawable:
                assert "ann" not in sources
                return
            except WithdrawRefused:
                assert writers[-1] == "ann" or sources == {"ann"}  # the current text is hers, or all of it
                return
            assert writers[-1] != "ann" and sources - {"ann"}
            result = forget_user(store, "ann", "a1", settings=Settings(_env_file=None,
                                                                        store_url=f"sqlite:///{tmp}/unused.db"))
            assert verify_erasure(store, "ann", "a1", blob_keys=result.blob_keys).traces == []
            [after] = store.facts.get_facts(["f1"])
            assert after.retired_at is None and after.content == before.content
            assert "ann" not in after.source_user_ids and after.source_user_ids
            assert "<ann>" not in after.search_text  # no older text nor source message of hers
        finally:
            store.close()
