"""Usage roll-ups on every adapter (design §11 "Observability and cost"): what the stages record is
summed per agent, user, session and day as they record it, and reads of the roll-ups give what
summing the runs and usage records gives (``cost_rows``), however the stages and records came."""

from __future__ import annotations

import itertools
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from pipeline.clock import FrozenClock
from pipeline.cost import price_models
from pipeline.store.ports.rollups import ALL_TIME
from schemas.documents import LLMUsage, StageRecord, UsageRecord
from schemas.settings import Settings
from testkit.sessions import cold_run
from tests.pipeline.store.conftest import ADAPTERS, open_adapter

PRICES = {"gpt-6-luna": {"input": 0.10, "output": 0.50}, "text-embedding-9": {"input": 0.02, "output": 0.0}}
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
USERS = ("u1", "u2", "u3")


def _calls(n: int, *, unpriced: bool = False, snapshot: str = "") -> dict:
    rows = {"gpt-6.1-luna" if unpriced else "gpt-6-luna": {
                "kind": "llm", "provider": "openai", "calls": 1, "input_tokens": 100 * n, "output_tokens": 7 * n},
            "text-embedding-9": {"kind": "embedding", "provider": "openai", "calls": 1, "input_tokens": 40 * n,
                                 "output_tokens": 0}}
    if snapshot:
        rows["text-embedding-9"]["snapshots"] = [snapshot]
    return price_models(rows, PRICES)


def _done(at: datetime, by_model: dict) -> StageRecord:
    return StageRecord(status="done", output={}, started_at=at, finished_at=at, duration_ms=5.0, attempts=1,
                       usage=LLMUsage(calls=1, by_model=by_model))


class _Usd(float):
    """Dollars equal within a nano-dollar: sums may add in another order."""

    def __eq__(self, other):
        return other is not None and abs(float(self) - float(other)) < 1e-9

    __hash__ = float.__hash__


def _totals(rows) -> dict:
    """Per (day, stage, model): calls, tokens and dollars, None for an unknown price."""
    return {(r.day, r.stage, r.model): (r.calls, r.input_tokens, r.output_tokens,
                                        None if r.usd is None else _Usd(r.usd), r.snapshots) for r in rows}


def _all_time(rows) -> dict:
    """``_totals`` of ``cost_rows`` summed over days, keyed as the all-time roll-up rows are."""
    out: dict = {}
    for r in rows:
        c, i, o, usd, snaps = out.get((ALL_TIME, r.stage, r.model), (0, 0, 0, 0.0, ()))
        out[(ALL_TIME, r.stage, r.model)] = (
            c + r.calls, i + r.input_tokens, o + r.output_tokens,
            None if usd is None or r.usd is None else usd + r.usd, tuple(sorted({*snaps, *r.snapshots})))
    return {k: (*v[:3], None if v[3] is None else _Usd(v[3]), v[4]) for k, v in out.items()}


def assert_rollups_match_runs(store, sessions) -> None:
    for owner in [{}, *({"user_id": u} for u in USERS), *({"session_id": s} for s in sessions)]:
        runs = store.stats.cost_rows("a1", **owner)
        assert _totals(store.rollups.rollup_rows("a1", **owner)) == _totals(runs), owner
        assert _totals(store.rollups.rollup_rows("a1", all_time=True, **owner)) == _all_time(runs), owner


def _history(store, settings, clock) -> list[str]:
    """Runs of a1 over two days, in a session shared by u1 and u2 and one of u3 alone, a stage
    ending after midnight, a failed attempt's record and a session-end record."""
    n = itertools.count(1)
    sessions = []
    for day in range(2):
        for session, users in (("s1", ["u1", "u2"]), ("s2", ["u3"])):
            sid = f"{session}-d{day}"
            sessions.append(sid)
            run_id = cold_run(store, settings, clock, sid)
            store.runs.update_run_fields(run_id, user_ids=users)
            store.runs.start_stage(run_id, "extract_facts", clock.now())
            assert store.runs.complete_stage(run_id, "extract_facts", _done(clock.now(), _calls(next(n), snapshot="e-9b")))
            late = clock.now() + timedelta(hours=16)
            assert store.runs.complete_stage(run_id, "consolidate:user", _done(late, _calls(next(n), unpriced=day == 1)))
            store.stats.record_usage(UsageRecord(usage_id=f"fail-{run_id}", agent_id="a1", session_id=sid, run_id=run_id,
                                           stage="decide_facts", at=clock.now(), by_model=_calls(next(n))))
            store.stats.record_usage(UsageRecord(usage_id=f"end-{sid}", agent_id="a1", session_id=sid,
                                           stage="consolidate_session", at=clock.now(), by_model=_calls(next(n))))
        clock.advance(hours=24)
    return sessions


@pytest.fixture
def history(store, tmp_path):
    settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp_path / 'unused.db'}")
    return store, _history(store, settings, FrozenClock(T0)), settings


def test_rollups_sum_what_the_runs_and_records_hold_per_agent_user_session_and_day(history):
    store, sessions, _ = history
    assert_rollups_match_runs(store, sessions)
    [row] = [r for r in store.rollups.rollup_rows("a1", user_id="u3", all_time=True)
             if (r.stage, r.model) == ("consolidate", "gpt-6.1-luna")]
    assert (row.usd, row.price) == (None, "unpriced")  # never a partial sum shown as whole


def test_a_stage_completed_again_and_a_record_kept_again_add_nothing(history):
    store, sessions, _ = history
    before = store.rollups.rollup_rows("a1", all_time=True)
    run = store.runs.list_runs(agent_id="a1", session_id=sessions[0])[0]
    assert store.runs.complete_stage(run.run_id, "extract_facts", _done(T0, _calls(50))) is False
    store.stats.record_usage(UsageRecord(usage_id=f"end-{sessions[0]}", agent_id="a1", session_id=sessions[0],
                                   stage="consolidate_session", at=T0, by_model=_calls(4)))
    assert store.rollups.rollup_rows("a1", all_time=True) == before


def test_rebuilding_gives_the_rows_the_stages_added_and_again_the_same(history):
    store, sessions, _ = history
    daily, total = store.rollups.rollup_rows("a1", since_day="2026-03-02"), store.rollups.rollup_rows("a1", all_time=True)
    assert store.rollups.rebuild_rollups() > 0
    assert _totals(store.rollups.rollup_rows("a1", since_day="2026-03-02")) == _totals(daily)
    assert _totals(store.rollups.rollup_rows("a1", all_time=True)) == _totals(total)
    store.rollups.rebuild_rollups()
    assert_rollups_match_runs(store, sessions)


def test_every_agent_s_spend_of_a_day_reads_across_agents(history):
    store, _, _ = history
    day = {"since_day": "2026-03-01", "until_day": "2026-03-02"}
    one = sum(r.usd or 0 for r in store.rollups.rollup_rows("a1", **day))
    store.stats.record_usage(UsageRecord(usage_id="a2-1", agent_id="a2", stage="consolidate_session", at=T0,
                                   by_model=_calls(10)))
    every = sum(r.usd or 0 for r in store.rollups.rollup_rows(None, **day))
    assert every == pytest.approx(one + sum(r["usd"] for r in _calls(10).values()))


def test_forgetting_a_user_drops_their_rollups_and_keeps_the_agent_total(history):
    store, sessions, _ = history
    total = _totals(store.rollups.rollup_rows("a1", all_time=True))
    theirs = _totals(store.rollups.rollup_rows("a1", user_id="u2", all_time=True))
    store.admin.forget_user("u1", "a1")  # every message of the history is u1's: their sessions go too
    assert store.rollups.rollup_rows("a1", user_id="u1", all_time=True) == []
    assert store.rollups.rollup_rows("a1", session_id="s2-d0", all_time=True) == []
    assert _totals(store.rollups.rollup_rows("a1", all_time=True)) == total
    assert _totals(store.rollups.rollup_rows("a1", user_id="u2", all_time=True)) == theirs != {}


# ------------------------------------------------------------------ the property -------------
_STEP = st.one_of(
    st.tuples(st.just("run"), st.integers(0, 2), st.sets(st.sampled_from(USERS), min_size=1)),
    st.tuples(st.just("stage"), st.integers(0, 5), st.sampled_from(["extract_facts", "consolidate:user", "embed_facts"]),
              st.integers(1, 9), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("usage"), st.integers(-1, 5), st.integers(1, 9), st.integers(0, 30)),
)


@pytest.mark.parametrize("kind", ADAPTERS)
@hsettings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=12))
def test_rollups_always_equal_the_sum_over_runs(kind, steps):
    with tempfile.TemporaryDirectory() as tmp:
        store = open_adapter(kind, Path(tmp))
        store.create_indexes()
        settings = Settings(_env_file=None, store_url=f"sqlite:///{tmp}/unused.db")
        clock = FrozenClock(T0)
        runs: list[str] = []
        sessions: set[str] = set()
        for i, step in enumerate(steps):
            if step[0] == "run":
                sid = f"s{step[1]}-{i}"
                runs.append(cold_run(store, settings, clock, sid))
                store.runs.update_run_fields(runs[-1], user_ids=sorted(step[2]))
                sessions.add(sid)
            elif step[0] == "stage" and runs:
                _, which, stage, n, hours, unpriced = step
                at = clock.now() + timedelta(hours=hours)
                store.runs.complete_stage(runs[which % len(runs)], stage, _done(at, _calls(n, unpriced=unpriced)))
            elif step[0] == "usage":
                _, which, n, hours = step
                run_id = runs[which % len(runs)] if runs and which >= 0 else None
                store.stats.record_usage(UsageRecord(usage_id=f"u-{i}", agent_id="a1", run_id=run_id, stage="decide_facts",
                                               at=clock.now() + timedelta(hours=hours), by_model=_calls(n)))
        assert_rollups_match_runs(store, sessions)
        store.close()


def test_migrate_fills_the_rollups_of_a_store_made_before_them(history):
    from pipeline.upgrade import upgrade_store

    store, sessions, _ = history
    expected = _totals(store.rollups.rollup_rows("a1", all_time=True))
    for table in ("usage_rollups",):  # as a store made before the roll-ups holds them: not at all
        if hasattr(store, "db"):
            with store.db.write() as conn:
                conn.execute(f"DELETE FROM {store.db.t(table)}")
        else:
            store.col(table).delete_many({})
    assert store.rollups.rollup_rows("a1", all_time=True) == []
    assert upgrade_store(store).rollup_rows > 0
    assert _totals(store.rollups.rollup_rows("a1", all_time=True)) == expected
    upgrade_store(store)
    assert_rollups_match_runs(store, sessions)



# ------------------------------------------------------------------ the Mongo emulation --------
@pytest.mark.parametrize("update,code", [
    ({"$inc": {"calls": 1}, "$setOnInsert": {"calls": 0}}, 40),      # one path, two operators
    ({"$set": {"v": {"a": 1}}, "$inc": {"v.a": 1}}, 40),             # a path and one under it
    ({"$inc": {"usd": None}}, 14),                                   # $inc takes numbers only
    ({"$inc": {"usd": "0.5"}}, 14),
])
def test_the_mongo_emulation_refuses_updates_the_server_refuses(update, code):
    from pymongo import UpdateOne
    from pymongo.errors import OperationFailure

    from testkit.mongo_emulation import emulated_database

    col = emulated_database()["r"]
    for call in (lambda: col.update_one({"k": 1}, update, upsert=True),
                 lambda: col.bulk_write([UpdateOne({"k": 1}, update, upsert=True)])):
        with pytest.raises(OperationFailure) as caught:
            call()
        assert caught.value.code == code
    assert col.count_documents({}) == 0
