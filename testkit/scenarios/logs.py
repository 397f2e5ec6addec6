"""Log hygiene and hostile events through a real worker (issue: reliability §4 and §5).

Workers run at INFO with fake provider keys in their environment, on conversations that carry
a distinctive marker, with provider faults (including answers cut off mid-way, which carry
memory text) and a bounded sample of hostile events sent straight onto the ingest queue.
Figures: log lines that reveal a key or the marker (``leaks``), rejections recorded against
those expected, accepted hostile events stored, and worker crashes.
"""

from __future__ import annotations

import random
from pathlib import Path

from testkit.scenarios.checks import log_leaks_above_debug
from testkit.scenarios.crash import _settle, scenario
from testkit.scenarios.deps import injected_counts
from testkit.scenarios.fuzz import KINDS, fuzzed_event
from testkit.scenarios.harness import crash_lines
from testkit.scenarios.workload import end_event, plan_sessions, session_events
from pipeline import names
from workers.dispatch import send

FAKE_KEYS = {"OPENAI_API_KEY": "sk-proj-FAKEKEYreliability0000000000000000", "GEMINI_API_KEY": "AIzaFAKEKEYreliability000000000000000"}


def run_log_hygiene(workdir: Path, *, sessions: int = 4, fuzz: int = 30, seed: int = 0,
                    faults: str = "transient=0.15,invalid=0.1,truncated=0.25") -> dict:
    workdir = Path(workdir)
    calls_dir = workdir / "llm"
    calls_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    marker = f"quokka-zanzibar-{seed}-7731"
    env = {**FAKE_KEYS, "RELIABILITY_MODE": "faults",
           "RELIABILITY_DIR": str(calls_dir), "RELIABILITY_FAULTS": f"{faults},seed={seed}"}
    with scenario(workdir, env) as (store, redis, cluster, app, publisher):
        expected_rejects, accepted = 0, []
        kinds = [k for k in KINDS if k != "not_utf8"]  # a queue message is JSON: bytes cannot travel
        for n in range(fuzz):
            f = fuzzed_event(rng, rng.choice(kinds), "agent-0", f"fz{seed}-{n}", n)
            raw = f.raw
            if isinstance(raw, dict) and isinstance(raw.get("message"), dict) and isinstance(raw["message"].get("content"), str):
                raw["message"]["content"] += f" {marker}"
                if f.expect == "accept":
                    f = f.__class__(f.kind, f.expect, raw, f.session_id, f.message_id, raw["message"]["content"])
            send(names.TASK_INGEST_EVENT, {"event": raw}, app=app)
            expected_rejects += f.expect == "reject"
            if f.expect == "accept":
                accepted.append(f)
        for f in accepted:  # their sessions end too, so that every message forms
            send(names.TASK_INGEST_EVENT, {"event": end_event(f.raw["agent_id"], f.session_id)}, app=app)
        for s in plan_sessions(rng, sessions, prefix=f"logs{seed}"):
            events = session_events(rng, agent_id=s["agent_id"], session_id=s["session_id"], users=s["users"],
                                    messages=8, tag=f" {marker}")
            publisher.publish_batch(events + [end_event(s["agent_id"], s["session_id"])])
        settled = _settle(cluster, app, redis, store)
        text = cluster.log_text()
        leaks = log_leaks_above_debug(text.splitlines(), [marker, *FAKE_KEYS.values()])
        stored_ok = sum(
            1 for f in accepted
            if [m.content for m in store.ingest.get_messages(f.session_id, 1, 10**9)] == [f.content]
        )
        return {
            "settled": settled,
            "events_fuzzed": fuzz,
            "rejections_expected": expected_rejects,
            "rejections_recorded": len(store.ingest.list_rejections(limit=100_000)),
            "hostile_accepted_stored": stored_ok,
            "hostile_accepted_expected": len(accepted),
            "log_lines": len(text.splitlines()),
            "faults_injected": {k.split(":", 1)[1]: v for k, v in injected_counts(calls_dir).items() if k.startswith("fault:")},
            "leaks": len(leaks),
            "leak_sample": [line[:300] for line in leaks[:3]],
            "worker_crashes": cluster.unexpected_exits + len([l for l in crash_lines(text) if "Unrecoverable" in l]),
        }
