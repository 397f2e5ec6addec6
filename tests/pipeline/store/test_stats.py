"""The statistics port on every adapter: the store's sums (``cost_rows``) and counts
(``reflection_counts``) give what summing the listed runs, usage records and reflections in
Python gave (the way ``get_memory_stats`` and ``memoryctl cost`` counted before), for the
agent, a user, a session and a time window; and they hold at 20,000 runs."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from pipeline import cost
from pipeline.clock import FrozenClock
from pipeline.cost import price_models
from schemas.documents import FormationRun, LLMUsage, Reflection, StageRecord, UsageRecord, scope_key
from schemas.settings import Settings
from testkit.sessions import cold_run
from tests.pipeline.store.conftest import ADAPTERS, open_adapter

PRICES = {"gpt-6-luna": {"input": 0.10, "output": 0.50}, "text-embedding-9": {"input": 0.02, "output": 0.0}}
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def _calls(n: int, *, unpriced: bool = False) -> dict:
    rows = {"gpt-6-luna": {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 100 * n, "output_tokens": 7 * n},
            "text-embedding-9": {"kind": "embedding", "provider": "openai", "calls": 1, "input_tokens": 40 * n,
                                 "output_tokens": 0},
            "offline-rules-v1": {"kind": "llm", "provider": "offline", "calls": 2, "input_tokens": n, "output_tokens": 1}}
    if unpriced:
        rows["mystery-4.5"] = {"kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 3 * n, "output_tokens": n}
    return price_models(rows, PRICES)


def _complete(store, run_id: str, stage: str, at: datetime, by_model: dict) -> None:
    store.runs.start_stage(run_id, stage, at)
    store.runs.complete_stage(run_id, stage, StageRecord(
        status="done", output={}, started_at=at, finished_at=at, duration_ms=5.0, attempts=1,
        usage=LLMUsage(calls=1, input_tokens=1, output_tokens=1, by_model=by_model)))


@pytest.fixture(scope="module", params=ADAPTERS)
def history(request, tmp_path_factory):
    """Runs of agent a1 over three days in three sessions, two of them shared by u1 and u2,
    with stages ending on the next day, and failed attempts' and session-end usage records.
    Built once per adapter for the module (on the Mongo emulation that takes a while): the
    tests that take it only read it."""
    tmp_path = tmp_path_factory.mktemp("history")
    store = open_adapter(request.param, tmp_path)
    store.create_indexes()
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'unused.db'}")
    clock = FrozenClock(T0)
    n = itertools.count(1)
    for day in range(3):
        for session in ("s1", "s2", "s3"):
            run_id = cold_run(store, settings, clock, f"{session}-d{day}")
            users = ["u1", "u2"] if session != "s3" else ["u1"]
            store.runs.update_run_fields(run_id, user_ids=users)
            _complete(store, run_id, "extract_facts", clock.now(), _calls(next(n)))
            # a consolidation finishing after midnight: its day is its end's, not the run's
            _complete(store, run_id, "consolidate:user", clock.now() + timedelta(hours=16),
                      _calls(next(n), unpriced=session == "s2"))
            store.stats.record_usage(UsageRecord(usage_id=f"fail-{run_id}", agent_id="a1", session_id=f"{session}-d{day}",
                                           run_id=run_id, stage="decide_facts", at=clock.now(), by_model=_calls(next(n))))
            store.stats.record_usage(UsageRecord(usage_id=f"end-{session}-{day}", agent_id="a1", session_id=f"{session}-d{day}",
                                           stage="consolidate_session", at=clock.now(), by_model=_calls(next(n))))
        clock.advance(hours=24)
    yield store
    store.close()


def _old_way(store, *, since=None, until=None, user_id=None, session_id=None) -> dict:
    """What the stats and ``memoryctl cost`` summed before: every listed run and usage record."""
    runs = [r for r in store.runs.list_runs(agent_id="a1", limit=10_000_000)
            if (since is None or r.created_at >= since) and (until is None or r.created_at < until)
            and (user_id is None or user_id in r.user_ids) and (session_id is None or r.session_id == session_id)]
    ids = {r.run_id for r in runs}
    records = [u for u in store.stats.list_usage("a1", since)
               if (until is None or u.at < until) and (session_id is None or u.session_id == session_id)
               and (user_id is None or u.run_id in ids)]
    return cost.of_runs(runs, records)


def _days_old_way(store) -> dict:
    days: dict[str, list] = {}
    for run in store.runs.list_runs(agent_id="a1", limit=10_000_000):
        for record in run.stages.values():
            if record.usage.by_model:
                at = record.finished_at or record.started_at or run.created_at
                days.setdefault(at.date().isoformat(), []).append(record.usage.by_model)
    for record in store.stats.list_usage("a1"):
        days.setdefault(record.at.date().isoformat(), []).append(record.by_model)
    return {day: cost.summary(rows) for day, rows in days.items()}


def _summary(rows) -> dict:
    return cost.summary(r.by_model() for r in rows)


@pytest.mark.parametrize("window", [
    {}, {"user_id": "u2"}, {"user_id": "u1"}, {"session_id": "s2-d1"},
    {"since": T0 + timedelta(hours=20)}, {"until": T0 + timedelta(hours=40)},
    {"since": T0 + timedelta(hours=20), "until": T0 + timedelta(hours=40)}, {"user_id": "nobody"},
], ids=["agent", "shared-user", "every-run-user", "session", "since", "until", "window", "unknown-user"])
def test_the_store_sums_the_same_cost_as_listing_every_run(history, window):
    rows = history.stats.cost_rows("a1", **window)
    assert _summary(rows) == _old_way(history, **window)
    assert {r.stage for r in rows} <= {"extract_facts", "consolidate", "decide_facts", "consolidate_session"}


def test_the_sums_per_day_follow_each_stage_s_end(history):
    by_day: dict[str, list] = {}
    for row in history.stats.cost_rows("a1"):
        by_day.setdefault(row.day, []).append(row.by_model())
    assert {day: cost.summary(rows) for day, rows in by_day.items()} == _days_old_way(history)
    assert len(by_day) == 4  # three days of runs, and the last day's consolidations past midnight


def test_an_unpriced_call_leaves_its_group_unpriced(history):
    rows = history.stats.cost_rows("a1", session_id="s2-d0")
    mystery = [r for r in rows if r.model == "mystery-4.5"]
    assert mystery and all(r.usd is None and r.price == "unpriced" for r in mystery)
    assert _summary(rows)["unpriced"] == ["mystery-4.5"]


def test_reflection_counts_match_the_listed_reflections(store):
    key, other = scope_key("user", user_id="u1"), scope_key("agent")
    reflections = [Reflection(reflection_id=f"r{i}", agent_id="a1", scope="user", scope_key=key, content=f"note {i}",
                              formed_at=T0 + timedelta(minutes=i), source_run_id="run-1") for i in range(7)]
    store.reflections.insert_reflections(reflections)
    store.reflections.mark_absorbed(["r0", "r1", "r6"], 1, T0 + timedelta(hours=1))
    counts = store.stats.reflection_counts("a1", [key, other])
    listed = store.reflections.list_reflections("a1", key)
    assert counts[key].total == len(listed) == 7
    assert counts[key].unabsorbed == sum(not r.absorbed for r in listed) == 4
    assert counts[key].last_formed_at == max(r.formed_at for r in listed)
    assert counts[other] == (0, 0, None)


def test_a_file_made_before_the_summed_columns_gets_them_from_its_documents(tmp_path):
    """An older SQLite file (runs without ``usage`` and ``user_ids``) is filled in when opened."""
    from pipeline.store.sqlite import SQLiteStore

    path = str(tmp_path / "old.db")
    store = SQLiteStore(path)
    settings = Settings(_env_file=None, store_url=f"sqlite:///{path}")
    clock = FrozenClock(T0)
    for i, session in enumerate(("s1", "s2")):
        run_id = cold_run(store, settings, clock, session)
        store.runs.update_run_fields(run_id, user_ids=["u1", f"u{i + 2}"])
        _complete(store, run_id, "extract_facts", clock.now(), _calls(i + 1, unpriced=i == 1))
    filters = ({}, {"user_id": "u3"}, {"session_id": "s1"})
    before = [_summary(store.stats.cost_rows("a1", **f)) for f in filters]
    assert all(s["by_model"] for s in before)
    with store.db.write() as conn:
        conn.execute(f"UPDATE {store.db.t('runs')} SET usage = NULL, user_ids = NULL")
    store.close()

    reopened = SQLiteStore(path)
    try:
        assert [_summary(reopened.stats.cost_rows("a1", **f)) for f in filters] == before
    finally:
        reopened.close()


#: runs of the big agent: 5,000 on SQLite (ten days of runs, every sum below over many days and
#: sessions; 20,000 proved no more in 18 s); 1,000 on the Mongo emulation, which takes 150 s
#: for 20,000 (it runs the pipeline in Python), as long as every other store test together
BIG = {"sqlite": 5_000, "mongo": 1_000}


def _bulk_runs(store, runs: int) -> None:
    """``runs`` runs of agent a1, three minutes apart (50 sessions, users u0..u99, two stages
    each), and 100 of agent a2, written as whole rows (the store's own row writer for SQLite,
    documents for Mongo)."""
    docs = []
    for i in range(runs + 100):
        created = T0 + timedelta(minutes=3 * i)
        stages = {
            "extract_facts": StageRecord(status="done", started_at=created, finished_at=created + timedelta(seconds=5),
                                         usage=LLMUsage(by_model=_calls(1 + i % 5))),
            "consolidate:user": StageRecord(status="done", started_at=created, finished_at=created + timedelta(minutes=1),
                                            usage=LLMUsage(by_model=_calls(2, unpriced=i % 1000 == 0))),
        }
        docs.append(FormationRun(run_id=f"run-{i:05d}", agent_id="a1" if i < runs else "a2", session_id=f"s{i % 50}",
                                 seq_from=1, seq_to=4, reason="cold", status="done", created_at=created,
                                 user_ids=[f"u{i % 100}"], stages=stages))
    if hasattr(store, "db"):
        with store.db.write() as conn:
            for run in docs:
                store.runs.put_run_row(conn, run)
    else:
        from pipeline.store.mongo.codec import escape_keys, to_doc

        store.col("runs").insert_many([escape_keys(to_doc(run, run.run_id)) for run in docs])


def test_sums_over_thousands_of_runs_come_from_the_store(store):
    runs = BIG["sqlite" if hasattr(store, "db") else "mongo"]
    _bulk_runs(store, runs)
    rows = store.stats.cost_rows("a1")
    total = _summary(rows)
    luna = total["by_model"]["gpt-6-luna"]
    # extract_facts: 100 * (1..5) tokens in per run, consolidations 200: (300 + 200) * runs
    assert luna["calls"] == 2 * runs and luna["input_tokens"] == (300 + 200) * runs
    assert total["unpriced"] == ["mystery-4.5"] and total["by_model"]["mystery-4.5"]["calls"] == runs // 1000
    ends = (T0 + timedelta(minutes=3 * i) + lag for i in range(runs) for lag in (timedelta(seconds=5), timedelta(minutes=1)))
    assert {r.day for r in rows} == {at.date().isoformat() for at in ends}  # 11 days on SQLite
    user = _summary(store.stats.cost_rows("a1", user_id="u7"))
    assert user["by_model"]["gpt-6-luna"]["calls"] == 2 * runs // 100
    day = _summary(store.stats.cost_rows("a1", since=T0 + timedelta(days=1), until=T0 + timedelta(days=2)))
    assert day["by_model"]["gpt-6-luna"]["calls"] == 2 * 480  # one run every three minutes
    session = _summary(store.stats.cost_rows("a1", session_id="s7"))
    assert session["by_model"]["gpt-6-luna"]["calls"] == 2 * runs // 50
    assert _summary(store.stats.cost_rows("a2"))["by_model"]["gpt-6-luna"]["calls"] == 200
