"""Races on one SQLite store from several OS processes (issue: reliability §3). Each returns
``duplicated`` and ``lost`` counts (zero when healthy) and its denominators.

- ``race_producers``: producers send every event of the same sessions, each in its own
  shuffled order, with extra copies under new event ids (same message id), and the session
  end before the last messages: every message is stored once with seqs 1..n, claims never
  overlap, and after the end every message is in exactly one claimed range.
- ``race_sweep_vs_trigger``: idle sessions due by the threshold rule and cold at once; one
  process redelivers their last message (which re-checks the threshold and claims) while two
  sweep cold sessions: each range is claimed once.
- ``race_consolidations``: processes consolidate the same scope keys at once (two holders per
  key) while another keeps adding reflections to them, as formation runs do: each reflection
  is absorbed at most once into a blob version that exists, and after a last pass none is left.
"""

from __future__ import annotations

import multiprocessing as mp
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from testkit.scenarios.workload import end_event, session_events

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _store(path: str):
    from pipeline.store.sqlite import SQLiteStore

    return SQLiteStore(path)


def _settings(**overrides):
    from schemas.settings import Settings

    return Settings(store_url="sqlite:///unused.db", llm_provider="offline", embedding_provider="hashing", **overrides)


def _ctx():
    # spawn: a fork of a process that already runs threads can inherit a held lock and hang
    return mp.get_context("spawn")


def _run_all(targets: list[tuple]) -> None:
    procs = [_ctx().Process(target=fn, args=args) for fn, *args in targets]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise RuntimeError(f"race process(es) failed with exit codes {bad}")


def _claims_overlap(runs) -> int:
    taken: dict[str, set[int]] = {}
    overlaps = 0
    for r in runs:
        seqs = set(range(r.seq_from, r.seq_to + 1))
        overlaps += len(taken.setdefault(r.session_id, set()) & seqs)
        taken[r.session_id] |= seqs
    return overlaps


# --- producers ----------------------------------------------------------------------------

def _produce(db: str, events: list, seed: int) -> None:
    from pipeline.clock import Clock
    from pipeline.ingest import ingest_raw_event

    store, settings = _store(db), _settings(formation_message_interval=5, formation_token_interval=10**6)
    order = list(events)
    random.Random(seed).shuffle(order)
    for event in order:
        ingest_raw_event(event, store, settings, Clock())
    store.close()


def race_producers(workdir: Path, *, producers: int = 4, sessions: int = 6, messages: int = 20, seed: int = 0) -> dict:

    db = str(Path(workdir) / "producers.db")
    _store(db).create_indexes()
    rng = random.Random(seed)
    events, ends, expected = [], [], {}
    for i in range(sessions):
        sid = f"prod{seed}-{i}"
        evs = session_events(rng, agent_id="agent-race", session_id=sid, users=[f"u{i}"], messages=messages)
        expected[sid] = [e["message"]["message_id"] for e in evs]
        copies = [dict(e, event_id=e["event_id"] + "-copy") for e in evs[::3]]  # same message, new event id
        events += evs + copies
        ends.append(end_event("agent-race", sid))
    sent = len(events) * producers
    # the session ends arrive while messages are still in flight: late messages must form too
    _run_all([(_produce, db, events + ends, seed * 100 + p) for p in range(producers)])
    store = _store(db)
    _finish_claims(store, ends)
    lost = duplicated = out_of_order = 0
    for sid, ids in expected.items():
        stored = store.ingest.get_messages(sid, 1, 10**9)
        seqs = sorted(m.seq for m in stored)
        duplicated += len(stored) - len({m.message_id for m in stored})
        lost += len(set(ids) - {m.message_id for m in stored})
        if seqs != list(range(1, len(stored) + 1)):
            duplicated += 1
        out_of_order += [m.message_id for m in stored] != ids  # conversation order is created_at order
    runs = store.runs.list_runs(limit=100_000)
    overlap = _claims_overlap(runs)
    unclaimed = sum(max(0, s.last_seq - s.claimed_through) for s in (store.ingest.get_session(sid) for sid in expected) if s)
    dup_counted = sum(store.ingest.get_session(sid).duplicates for sid in expected)
    store.close()
    unique = sessions * messages
    return {
        "events_sent": sent, "unique_messages": unique, "duplicates_counted": dup_counted,
        "duplicated": duplicated + overlap, "lost": lost + unclaimed, "out_of_order": out_of_order,
        "claims": len(runs), "duplicates_expected": sent - unique,
    }


def _finish_claims(store, ends: list) -> None:
    """Play the formation chain's part: finish each claimed run, then claim what is left with
    the session-end rule, until every session is claimed through its last message."""
    from pipeline.clock import Clock
    from pipeline.ingest import ingest_raw_event

    settings = _settings()
    for _ in range(20):
        active = [r for r in store.runs.list_runs(limit=100_000) if r.status == "claimed"]
        for run in sorted(active, key=lambda r: r.seq_from):
            store.runs.finish_run(run.run_id, Clock().now(), {}, [])
        for end in ends:
            ingest_raw_event(end, store, settings, Clock())
        if not any(r.status == "claimed" for r in store.runs.list_runs(limit=100_000)):
            return


# --- sweep vs threshold -------------------------------------------------------------------

def _sweep(db: str, done) -> None:
    from pipeline.sweep import sweep_cold_sessions

    store, settings = _store(db), _settings(formation_message_interval=4, formation_token_interval=10**6)
    while not done.is_set():
        sweep_cold_sessions(store, settings, T0 + timedelta(hours=1))
    store.close()


def _trip(db: str, events: list, done) -> None:
    from pipeline.clock import FrozenClock
    from pipeline.ingest import ingest_raw_event

    # a redelivered message re-checks the threshold rule and claims if it holds
    store, settings = _store(db), _settings(formation_message_interval=4, formation_token_interval=10**6)
    for event in events:
        ingest_raw_event(event, store, settings, FrozenClock(T0))
    done.set()
    store.close()


def race_sweep_vs_trigger(workdir: Path, *, sessions: int = 30, seed: int = 0) -> dict:
    """Sessions hold 4 unclaimed, idle messages: due by the threshold rule and cold at once.
    One process re-delivers their last message (the threshold claim), two sweep."""
    from pipeline.clock import FrozenClock
    from pipeline.ingest import ingest_raw_event

    db = str(Path(workdir) / "sweep.db")
    store = _store(db)
    store.create_indexes()
    rng = random.Random(seed)
    quiet = _settings(formation_message_interval=10**6, formation_token_interval=10**9)
    last = []
    for i in range(sessions):
        evs = session_events(rng, agent_id="agent-race", session_id=f"sweep{seed}-{i}", users=[f"u{i}"], messages=4)
        for e in evs:
            ingest_raw_event(e, store, quiet, FrozenClock(T0))
        last.append(evs[3])
    done = _ctx().Event()
    _run_all([(_sweep, db, done), (_trip, db, last, done), (_sweep, db, done)])
    runs = store.runs.list_runs(limit=100_000)
    overlap = _claims_overlap(runs)
    unclaimed = sum(1 for i in range(sessions) if store.ingest.get_session(f"sweep{seed}-{i}").claimed_through < 4)
    reasons: dict[str, int] = {}
    for r in runs:
        reasons[r.reason] = reasons.get(r.reason, 0) + 1
    store.close()
    return {"sessions": sessions, "claims": len(runs), "by_reason": reasons, "duplicated": overlap,
            "lost": unclaimed}


# --- consolidations -----------------------------------------------------------------------

class _Deps:
    def __init__(self, db: str) -> None:
        from pipeline.clock import Clock
        from pipeline.llm.offline import OfflineLLM

        self.settings = _settings(consolidation_lease_s=30, task_soft_time_limit_s=20, task_time_limit_s=25)
        self.store = _store(db)
        self.llm = OfflineLLM(self.settings)
        self.clock = Clock()


def _reflection(agent: str, key: str, n: int, tag: str):
    from schemas.documents import Reflection

    scope, _, rest = key.partition(":")
    return Reflection(
        reflection_id=f"{tag}-{key}-{n}", agent_id=agent, scope=scope, scope_key=key,
        user_id=rest if scope == "user" else None, session_id=rest if scope == "session" else None,
        content=f"{rest or 'team'} wants weekly summaries of project {tag}{n} on Mondays",
        source_session_id=f"sess-{tag}", source_run_id=f"run-{tag}-{n // 3}", formed_at=datetime.now(timezone.utc),
    )


def _consolidate(db: str, keys: list[str], holder: str, done, outcomes) -> None:
    from pipeline.errors import TransientError
    from pipeline.formation.consolidate_stages import merge_scope
    from pipeline.formation.runner import Usage

    deps = _Deps(db)
    counts: dict[str, int] = {}
    r = 0
    while True:
        last = done.is_set()
        for key in keys:
            try:
                status = merge_scope(deps, "agent-race", key, model="offline", holder=f"{holder}-{r}",
                                     usage=Usage())["status"]
            except TransientError:
                status = "busy"  # a held lease or a lost compare-and-set: the buffer stays
            counts[status] = counts.get(status, 0) + 1
        r += 1
        if last:
            break
    outcomes.put(counts)
    deps.store.close()


def _form(db: str, keys: list[str], per_key: int, done) -> None:
    import time

    store = _store(db)
    for n in range(per_key):
        store.reflections.insert_reflections([_reflection("agent-race", key, n, "late") for key in keys])
        time.sleep(0.005)
    done.set()
    store.close()


def race_consolidations(workdir: Path, *, keys: int = 3, initial: int = 8, during: int = 40) -> dict:
    from pipeline.formation.consolidate_stages import merge_scope
    from pipeline.formation.runner import Usage

    db = str(Path(workdir) / "consolidation.db")
    store = _store(db)
    store.create_indexes()
    scope_keys = ["agent"] + [f"user:u{i}" for i in range(keys - 1)]
    for key in scope_keys:
        store.reflections.insert_reflections([_reflection("agent-race", key, n, "early") for n in range(initial)])
    done, outcomes = _ctx().Event(), _ctx().Queue()
    _run_all([
        (_consolidate, db, scope_keys, "a", done, outcomes),
        (_consolidate, db, list(reversed(scope_keys)), "b", done, outcomes),
        (_form, db, scope_keys, during, done),
    ])
    statuses: dict[str, int] = {}
    for _ in range(2):
        for k, v in outcomes.get(timeout=10).items():
            statuses[k] = statuses.get(k, 0) + v
    deps = _Deps(db)
    for key in scope_keys:  # the next consolidation picks up whatever arrived meanwhile
        merge_scope(deps, "agent-race", key, model="offline", holder="final", usage=Usage())
    deps.store.close()
    total = len(scope_keys) * (initial + during)
    lost = duplicated = buffered = 0
    merges = 0
    for key in scope_keys:
        blob = store.blobs.get_blob("agent-race", key)
        refl = store.reflections.list_reflections("agent-race", key)
        waiting = sum(1 for r in refl if not r.absorbed)
        # below the scope's threshold, a buffer waits for the next due consolidation (the
        # threshold is re-checked under the lease); at or over it after the last pass, it is stuck
        threshold = deps.settings.consolidation_threshold(key.partition(":")[0] or "agent")
        buffered += waiting if waiting < threshold else 0
        lost += waiting if waiting >= threshold else 0
        lost += sum(1 for r in refl if r.absorbed and (blob is None or (r.consolidated_into or 0) > blob.version))
        lost += (initial + during) - len(refl)
        versions = {r.consolidated_into for r in refl if r.absorbed}
        merges += blob.version if blob else 0
        # a version that absorbed nothing, or two reflections lists for one version, means a double merge
        duplicated += sum(1 for v in range(1, (blob.version if blob else 0) + 1) if v not in versions)
    store.close()
    return {"reflections": total, "merges": merges, "attempts": statuses, "duplicated": duplicated, "lost": lost,
            "buffered_below_threshold": buffered}
