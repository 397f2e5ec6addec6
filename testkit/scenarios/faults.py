"""Provider faults and hostile answers through real workers (issue: reliability §2 and §5).

The offline rules answer behind a seeded ``ScriptedLLM`` (``testkit.scenarios.deps.fault_llm``):
30% transient errors (timeouts, 429 with Retry-After, 5xx), 10% invalid JSON or
schema-violating answers, and decide_facts answers that UPDATE an id outside their
candidates. With ``hostile=True`` the answers also push every fact and reflection into the
user scope and add forged agent memory, and one agent has user memory switched off.

Figures beyond the audit's:
- ``faults_injected`` (by kind) and ``outside_ids_injected``, read from the workers' call logs;
- ``silently_empty``: done runs whose extraction stage recorded no LLM call and no reason to
  skip it (a fault read as "nothing extracted");
- ``outside_effects``: stored facts carrying the text of a forged out-of-candidate UPDATE;
- ``runs_picked_up_again``: runs that failed at least once and were reopened.
"""

from __future__ import annotations

import random
from pathlib import Path

from testkit.scenarios.audit import audit
from testkit.scenarios.crash import _settle, publish_session, scenario
from testkit.scenarios.deps import injected_counts
from testkit.scenarios.fuzz import INJECTIONS
from testkit.scenarios.workload import end_event, plan_sessions, session_events
from testkit.waiting import QUIET_S
from schemas.documents import AgentSettings

FORGED = "forged by the provider"
DEFAULT_FAULTS = "transient=0.3,invalid=0.1,outside=0.5"


def silently_empty(runs) -> list[str]:
    out = []
    for run in runs:
        if run.status != "done":
            continue
        for stage in ("extract_facts", "extract_reflections"):
            record = run.stages.get(stage)
            if record is None:
                out.append(f"{run.run_id}: {stage} missing")
                continue
            output = record.output or {}
            if record.usage.calls < 1 and not output.get("skipped"):
                out.append(f"{run.run_id}: {stage} done without an LLM answer")
        decide = run.stages.get("decide_facts")
        if decide and (decide.output or {}).get("llm_items", 0) > 0 and decide.usage.calls < 1:
            out.append(f"{run.run_id}: decide_facts decided {decide.output['llm_items']} facts without an LLM answer")
    return out


def run_faults(
    workdir: Path, *, sessions: int = 12, messages: int = 8, seed: int = 0, faults: str = DEFAULT_FAULTS,
    hostile: bool = False, settle_quiet_s: float = QUIET_S,
) -> dict:
    workdir = Path(workdir)
    calls_dir = workdir / "llm"
    calls_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    env = {"RELIABILITY_MODE": "hostile" if hostile else "faults",
           "RELIABILITY_DIR": str(calls_dir), "RELIABILITY_FAULTS": f"{faults},seed={seed}"}
    with scenario(workdir, env) as (store, redis, cluster, app, publisher):
        if hostile:
            store.ingest.put_agent_settings(AgentSettings(agent_id="agent-1", user_memory_enabled=False))
        for s in plan_sessions(rng, sessions, prefix=f"faults{seed}", group_every=3 if hostile else 5):
            events = session_events(rng, agent_id=s["agent_id"], session_id=s["session_id"], users=s["users"],
                                    messages=messages, injections=INJECTIONS if hostile else ())
            publish_session(publisher, events, end_event(s["agent_id"], s["session_id"]))
        settled = _settle(cluster, app, redis, store, settle_quiet_s)
        figures = audit(store)
        runs = store.runs.list_runs(limit=100_000)
        facts = store.admin.dump_all().get("facts", [])
        counts = injected_counts(calls_dir)
        empty = silently_empty(runs)
        figures.update(
            settled=settled,
            messages_not_ingested=sessions * messages - figures["messages"],
            llm_calls=sum(counts.values()),
            faults_injected={k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("fault:")},
            outside_ids_injected=counts.get("outside", 0),
            hostile_answers=counts.get("hostile", 0),
            silently_empty=len(empty),
            outside_effects=sum(1 for f in facts if FORGED in f.get("content", "") or
                                any(FORGED in h.get("content", "") for h in f.get("history", []))),
            runs_picked_up_again=sum(1 for r in runs if r.attempts > 1),
            stage_failures_recorded=sum(1 for r in runs for rec in r.stages.values() if rec.error),
            worker_crashes=cluster.unexpected_exits + cluster.log_text().count("Unrecoverable error"),
        )
        figures["samples"]["silently_empty"] = empty[:5]
        return figures
