"""Reliability report: crash, provider-fault, hostile-provider, race, hostile-input, log,
broker-outage and store-outage scenarios on real Redis and real Celery workers, with SQLite
(and the Mongo emulation for the store outage).

    python -m bench.reliability --json          # about 4 minutes on 2 cores
    python -m bench.reliability --json --quick  # smaller sizes, about 2.5 minutes

Prints one line per scenario, then one JSON object as the last line. The loss, duplicate,
stuck and leak figures of a healthy pipeline are all zero; the control run (stage effects
without idempotency keys, ``testkit.scenarios.deps.SloppyStore``) must show ``duplicate_facts > 0``,
which proves the audit can see a defect. Needs ``redis-server`` on the PATH.

The exit status is 0 only when all of them are zero and the control saw its duplicates. The
broker figures also count, apart, events lost to a pop Redis persisted and never answered
(``*_lost_to_unanswered_pops``, read from its append-only file), the loss that
``workers/transport.py`` closes for single-queue workers.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from testkit.scenarios.checks import compose_exposures, load_compose

REPO = Path(__file__).resolve().parents[1]

FULL = dict(crash_sessions=50, kills=20, control_sessions=6, control_kills=2, fault_sessions=16,
            hostile_sessions=9, fuzz=600, log_fuzz=40, outage_events=300,
            store_outage_sessions=16, sqlite_lock_s=15.0, mongo_outage_s=10.0)
QUICK = dict(crash_sessions=16, kills=8, control_sessions=4, control_kills=1, fault_sessions=8,
             hostile_sessions=6, fuzz=200, log_fuzz=20, outage_events=150,
             store_outage_sessions=10, sqlite_lock_s=9.0, mongo_outage_s=7.0)


def fuzz_ingest(workdir: Path, size: int, seed: int) -> dict:
    """A seeded stream of hostile events, good ones interleaved, through ``pipeline.ingest``."""
    from testkit.scenarios.fuzz import fuzzed_stream
    from pipeline.clock import Clock
    from pipeline.ingest import ingest_raw_events
    from pipeline.store.sqlite import SQLiteStore
    from schemas.settings import Settings

    store = SQLiteStore(str(workdir / "fuzz.db"))
    store.create_indexes()
    try:
        stream = fuzzed_stream(random.Random(seed), "agent-fuzz", size, good_ratio=0.3)
        batch = ingest_raw_events([f.raw for f in stream], store, Settings(store_url="sqlite:///x"), Clock())
        wrong = sum(1 for f, r in zip(stream, batch.results)
                    if (r.status == "rejected") != (f.expect == "reject") or (r.status == "rejected" and not r.errors))
        lost_good = sum(1 for f in stream if f.expect == "accept" and
                        [m.content for m in store.ingest.get_messages(f.session_id, 1, 10**9)] != [f.content])
        return {"events_fuzzed": size, "events_rejected": sum(r.status == "rejected" for r in batch.results),
                "rejections_recorded": len(store.ingest.list_rejections(limit=10**6)),
                "misclassified": wrong + (batch.error is not None), "good_lost": lost_good}
    finally:
        store.close()


def _say(name: str, figures: dict, keys: list[str]) -> None:
    shown = ", ".join(f"{k}={figures.get(k)}" for k in keys)
    print(f"{name:<10} {shown}", flush=True)


def run(sizes: dict, workdir: Path, seed: int = 0) -> dict:
    started = time.monotonic()
    s: dict[str, dict] = {}
    for name in ("crash", "control", "faults", "hostile", "races", "fuzz", "logs", "outage", "outage-crash",
                 "store-sqlite", "store-mongo"):
        (workdir / name).mkdir(parents=True, exist_ok=True)
    _run_formation_scenarios(s, sizes, workdir, seed)
    _run_delivery_scenarios(s, sizes, workdir, seed)
    exposures = compose_exposures(load_compose(REPO / "docker-compose.yml"))
    print(f"{'compose':<10} exposures={exposures}", flush=True)
    stores = [s["store_sqlite"], s["store_mongo"]]
    return {
        **_totals(s, sizes, exposures),
        **_outages(s),
        "compose_exposures": len(exposures),
        "control_duplicate_facts": s["control"]["duplicate_facts"],
        "control_sees_duplicates": s["control"]["duplicate_facts"] > 0,
        "all_settled": all(f["settled"] for f in (s["crash"], s["faults"], s["hostile"], s["logs"], *stores)),
        "seconds": round(time.monotonic() - started, 1),
    }


def _run_formation_scenarios(s: dict[str, dict], sizes: dict, workdir: Path, seed: int) -> None:
    """Crashes (and their control), provider faults, hostile answers, races, into ``s``."""
    from testkit.scenarios.crash import CONTROL_POINTS, run_crash
    from testkit.scenarios.faults import run_faults
    from testkit.scenarios.races import race_consolidations, race_producers, race_sweep_vs_trigger

    s["crash"] = run_crash(workdir / "crash", sessions=sizes["crash_sessions"], kills=sizes["kills"], seed=seed)
    _say("crash", s["crash"], ["kills_confirmed", "kills_attempted", "formations_completed", "messages_not_ingested",
                               "messages_unformed",
                               "duplicate_facts", "lost_reflections", "stuck_runs", "dead_runs", "leaks", "settled"])
    s["control"] = run_crash(workdir / "control", sessions=sizes["control_sessions"], kills=sizes["control_kills"],
                             seed=seed + 1, control=True, points=CONTROL_POINTS)
    _say("control", s["control"], ["kills_confirmed", "duplicate_facts"])
    s["faults"] = run_faults(workdir / "faults", sessions=sizes["fault_sessions"], seed=seed + 2)
    _say("faults", s["faults"], ["llm_calls", "faults_injected", "outside_ids_injected", "formations_completed",
                                 "dead_runs", "runs_picked_up_again", "silently_empty", "outside_effects",
                                 "duplicate_facts", "stuck_runs", "settled"])
    s["hostile"] = run_faults(workdir / "hostile", sessions=sizes["hostile_sessions"], seed=seed + 3, hostile=True,
                              faults="outside=0.5")
    _say("hostile", s["hostile"], ["hostile_answers", "outside_ids_injected", "leaks", "outside_effects",
                                   "formations_completed"])
    races = {
        "producers": race_producers(workdir / "races", seed=seed),
        "sweep_vs_threshold": race_sweep_vs_trigger(workdir / "races", seed=seed),
        "consolidations": race_consolidations(workdir / "races"),
    }
    s["races"] = {"duplicated": sum(r["duplicated"] for r in races.values()),
                  "lost": sum(r["lost"] for r in races.values()), **races}
    _say("races", s["races"], ["duplicated", "lost"])


def _run_delivery_scenarios(s: dict[str, dict], sizes: dict, workdir: Path, seed: int) -> None:
    """Fuzzed events, log hygiene, broker and store outages, into ``s``."""
    from testkit.scenarios.logs import run_log_hygiene
    from testkit.scenarios.outage import run_broker_outage
    from testkit.scenarios.store_outage import run_mongo_failover, run_sqlite_lock

    s["fuzz"] = fuzz_ingest(workdir / "fuzz", sizes["fuzz"], seed)
    _say("fuzz", s["fuzz"], ["events_fuzzed", "events_rejected", "misclassified", "good_lost"])
    s["logs"] = run_log_hygiene(workdir / "logs", fuzz=sizes["log_fuzz"], seed=seed)
    _say("logs", s["logs"], ["log_lines", "leaks", "events_fuzzed", "rejections_recorded", "rejections_expected",
                             "worker_crashes"])
    s["outage"] = run_broker_outage(workdir / "outage", events=sizes["outage_events"], seed=seed)
    _say("outage", s["outage"], ["restart_signal", "publish_calls", "told_accepted", "clear_errors", "stored",
                                 "lost", "lost_to_unanswered_pops", "redis_restarts", "worker_crashes"])
    # the same with Redis SIGKILLed: what a broker crash costs (see workers/transport.py)
    s["outage_crash"] = run_broker_outage(workdir / "outage-crash", events=sizes["outage_events"], seed=seed + 1,
                                          crash=True)
    _say("crash-out", s["outage_crash"], ["restart_signal", "told_accepted", "clear_errors", "stored", "lost",
                                          "lost_to_unanswered_pops", "lost_unexplained", "worker_crashes"])
    # the store unavailable for several seconds while producers publish and formations run
    s["store_sqlite"] = run_sqlite_lock(workdir / "store-sqlite", sessions=sizes["store_outage_sessions"],
                                        lock_s=sizes["sqlite_lock_s"], seed=seed)
    s["store_mongo"] = run_mongo_failover(workdir / "store-mongo", sessions=sizes["store_outage_sessions"],
                                          outage_s=sizes["mongo_outage_s"], seed=seed)
    store_keys = ["outage_s", "store_errors", "store_errors_by_task", "retried_past_limit", "left_to_sweep", "told_accepted",
                  "stored", "lost", "formations_completed", "stuck_runs", "duplicate_facts", "settled"]
    _say("store-sql", s["store_sqlite"], store_keys)
    _say("store-mdb", s["store_mongo"], store_keys)


def _totals(s: dict[str, dict], sizes: dict, exposures: list) -> dict:
    """The headline figures, their denominators, and further losses and duplicates."""
    formed = [s["crash"], s["faults"], s["hostile"], s["store_sqlite"], s["store_mongo"]]
    faults = s["faults"]["faults_injected"]
    return {
        "kills": s["crash"]["kills_confirmed"],
        "formations_completed": sum(f["formations_completed"] for f in formed),
        "messages_unformed": sum(f["messages_unformed"] for f in formed),
        "duplicate_facts": sum(f["duplicate_facts"] for f in formed),
        "lost_reflections": sum(f["lost_reflections"] for f in formed),
        "stuck_runs": sum(f["stuck_runs"] for f in formed),
        "events_rejected": s["fuzz"]["events_rejected"] + s["logs"]["rejections_recorded"],
        "worker_crashes": sum(s[k]["worker_crashes"] for k in ("crash", "faults", "hostile", "logs", "outage",
                                                                "outage_crash", "store_sqlite", "store_mongo")),
        "leaks": sum(f["leaks"] for f in formed) + s["logs"]["leaks"] + len(exposures),
        # denominators
        "kills_confirmed": s["crash"]["kills_confirmed"],
        "kills_attempted": s["crash"]["kills_attempted"],
        "kills_by_stage": s["crash"]["kills_by_stage"],
        "faults_injected": sum(faults.values()) + s["faults"]["outside_ids_injected"],
        "faults_by_kind": {**faults, "outside_candidates": s["faults"]["outside_ids_injected"]},
        "llm_calls_under_faults": s["faults"]["llm_calls"],
        "events_fuzzed": s["fuzz"]["events_fuzzed"] + s["logs"]["events_fuzzed"],
        "sessions": sizes["crash_sessions"] + sizes["fault_sessions"] + sizes["hostile_sessions"]
        + 2 * sizes["store_outage_sessions"],
        # further losses and duplicates, zero when healthy
        "lost_facts": sum(f["lost_facts"] for f in formed),
        "messages_not_ingested": sum(f["messages_not_ingested"] for f in formed),
        "duplicate_reflections": sum(f["duplicate_reflections"] for f in formed),
        "dead_runs": sum(f["dead_runs"] for f in formed),
        "silently_empty_runs": s["faults"]["silently_empty"],
        "outside_candidate_effects": s["faults"]["outside_effects"] + s["hostile"]["outside_effects"],
        "race_duplicates": s["races"]["duplicated"],
        "race_losses": s["races"]["lost"],
        "fuzz_misclassified": s["fuzz"]["misclassified"],
    }


def _outages(s: dict[str, dict]) -> dict:
    stores = [s["store_sqlite"], s["store_mongo"]]
    return {
        "broker_outage_lost": s["outage"]["lost"],
        "broker_outage_lost_to_unanswered_pops": s["outage"]["lost_to_unanswered_pops"],
        "broker_outage_restart": s["outage"]["restart_signal"],
        "broker_outage_told_accepted": s["outage"]["told_accepted"],
        "broker_crash_lost": s["outage_crash"]["lost"],
        "broker_crash_lost_to_unanswered_pops": s["outage_crash"]["lost_to_unanswered_pops"],
        "broker_crash_lost_unexplained": s["outage_crash"]["lost_unexplained"],
        "broker_crash_told_accepted": s["outage_crash"]["told_accepted"],
        "broker_outage_clear_errors": s["outage"]["clear_errors"],
        "store_outage_lost": sum(f["lost"] for f in stores),
        "store_outage_stuck_runs": sum(f["stuck_runs"] for f in stores),
        "store_outage_told_accepted": sum(f["told_accepted"] for f in stores),
        "store_outage_errors_retried": sum(f["store_errors"] for f in stores),
        "store_outage_s": {"sqlite_lock": s["store_sqlite"]["outage_s"], "mongo_failover": s["store_mongo"]["outage_s"]},
        "store_outage_by_task": {"sqlite": s["store_sqlite"]["store_errors_by_task"],
                                 "mongo": s["store_mongo"]["store_errors_by_task"]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with the JSON figures (always printed last)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 2 minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the scenario files in this directory")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run(sizes, args.keep, args.seed)
    else:
        with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
            report = run(sizes, Path(tmp), args.seed)
    print(json.dumps(report, sort_keys=False))
    healthy = all(report[k] == 0 for k in (
        "messages_unformed", "duplicate_facts", "lost_reflections", "stuck_runs", "worker_crashes", "leaks",
        "lost_facts", "messages_not_ingested", "duplicate_reflections", "race_duplicates", "race_losses", "broker_outage_lost", "broker_crash_lost",
        "store_outage_lost", "store_outage_stuck_runs",
        "silently_empty_runs", "outside_candidate_effects", "fuzz_misclassified")) and report["control_sees_duplicates"]
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
