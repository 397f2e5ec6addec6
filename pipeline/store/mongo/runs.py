"""Mongo store, claims and formation runs: stages, leases, take-over of stale runs (the
``RunStore`` port). A repository of ``MongoStore``.

Stage records live under ``stages.<stage name>``. Free-form maps (stage outputs, totals,
models) have their keys escaped (``codec.escape_keys``): a scope key that names a user
may hold ``.`` or ``$``. What it calls on the rest of the store is ``parts.MongoParts``.

Claims: a run document is inserted first, marked ``_claim_pending``; then a compare-and-set
on the session (unchanged ``last_seq``/``claimed_through``, no holder) takes the range; then
the mark is removed. A crash in between leaves a pending run that ``reopen_run`` either
adopts (the session points at it) or deletes (it never got the range).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import DESCENDING, ReturnDocument

from pipeline.store import _common as c
from pipeline.store.mongo.codec import DuplicateKeyError, escape_key, escape_keys, from_doc, to_doc, unescape_keys
from pipeline.store.mongo.parts import CAS_ATTEMPTS, MongoRepository
from pipeline.store.ports.rollups import day_of, increments
from pipeline.store.ports.runs import RunStore
from pipeline.trigger import ClaimRule
from schemas.documents import FormationRun, SessionState, StageRecord


def _stage_field(stage: str) -> str:
    if not stage:
        raise ValueError("a stage needs a name")
    return f"stages.{escape_key(stage)}"


def _under(field: str, values: dict) -> dict:
    return {f"{field}.{k}": v for k, v in values.items()}


def run_from(doc: dict | None) -> FormationRun | None:
    return None if doc is None else from_doc(FormationRun, unescape_keys(doc))


class MongoRuns(MongoRepository, RunStore):
    def insert_run(self, run: FormationRun) -> bool:
        try:
            self.col("runs").insert_one(escape_keys(to_doc(run, run.run_id)))
        except DuplicateKeyError:
            return False
        return True

    def get_run(self, run_id: str) -> FormationRun | None:
        return run_from(self.col("runs").find_one({"_id": run_id}))

    def run_status(self, run_id: str) -> str | None:
        doc = self.col("runs").find_one({"_id": run_id}, {"status": 1})
        return None if doc is None else doc["status"]

    def require_run(self, run_id: str) -> FormationRun:
        run = self.get_run(run_id)
        if run is None:
            raise KeyError(f"run {run_id!r} does not exist")
        return run

    def update_run_fields(self, run_id: str, **fields: object) -> None:
        unknown = set(fields) - set(FormationRun.model_fields)
        if unknown:
            raise ValueError(f"update_run_fields: unknown run fields {sorted(unknown)}")
        # each field checked alone: the run and its stage outputs are not read to set a few
        values = {}
        for name, value in fields.items():
            adapter, checked = c.run_field(name, value)
            values[name] = escape_keys(adapter.dump_python(checked))
        runs = self.col("runs")
        found = runs.update_one({"_id": run_id}, {"$set": values}).matched_count if values \
            else runs.count_documents({"_id": run_id}, limit=1)
        if not found:
            raise KeyError(f"run {run_id!r} does not exist")

    def renew_run_lease(self, run_id: str, now: datetime, lease_s: float) -> bool:
        until = c.lease_until(now, lease_s)
        run = self.col("runs").find_one_and_update(
            {"_id": run_id, "status": {"$in": list(c.ACTIVE_RUN_STATUSES)}},
            {"$set": {"lease_expires_at": until}},
        )
        if run is None:
            return False
        self.col("sessions").update_one({"_id": run["session_id"], "active_run_id": run_id},
                                        {"$set": {"lease_expires_at": until}})
        return True

    def begin_stage(
        self, run_id: str, stage: str, now: datetime, lease_s: float
    ) -> tuple[FormationRun, StageRecord] | None:
        """Renew the lease and start the stage, reading the run once: the renewal returns the
        run (the stage's input), and the start returns only the stage's record."""
        until = c.lease_until(now, lease_s)
        runs = self.col("runs")
        doc = runs.find_one_and_update(
            {"_id": run_id, "status": {"$in": list(c.ACTIVE_RUN_STATUSES)}},
            {"$set": {"lease_expires_at": until}}, return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            return None
        self.col("sessions").update_one({"_id": doc["session_id"], "active_run_id": run_id},
                                        {"$set": {"lease_expires_at": until}})
        run = run_from(doc)
        if c.started(run.stages.get(stage), now) is None:
            return run, run.stages[stage]
        field = _stage_field(stage)
        started = runs.find_one_and_update(
            {"_id": run_id, f"{field}.status": {"$ne": "done"}},
            {"$set": _under(field, c.started_fields(now)), "$inc": {f"{field}.attempts": 1}},
            projection={field: 1},
            return_document=ReturnDocument.AFTER,
        )
        if started is None:  # completed by a concurrent delivery meanwhile, or the run is gone
            run = self.get_run(run_id)
            return None if run is None else (run, run.stages[stage])
        record = from_doc(StageRecord, unescape_keys(started)["stages"][stage])
        status = c.running_status(run.status)
        if status != run.status:
            runs.update_one({"_id": run_id, "status": run.status}, {"$set": {"status": status}})
        return run.model_copy(update={"stages": {**run.stages, stage: record}, "status": status}), record

    def start_stage(self, run_id: str, stage: str, now: datetime) -> StageRecord:
        field = _stage_field(stage)
        runs = self.col("runs")
        doc = runs.find_one_and_update(
            {"_id": run_id, f"{field}.status": {"$ne": "done"}},
            {"$set": _under(field, c.started_fields(now)), "$inc": {f"{field}.attempts": 1}},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            return self.require_run(run_id).stages[stage]
        runs.update_one({"_id": run_id, "status": "claimed"}, {"$set": {"status": c.running_status("claimed")}})
        return run_from(doc).stages[stage]

    def complete_stage(self, run_id: str, stage: str, record: StageRecord) -> bool:
        field = _stage_field(stage)
        update = {"$set": _under(field, escape_keys(c.completed_fields(record))),
                  "$max": {f"{field}.attempts": record.attempts}}
        run = self.col("runs").find_one_and_update(
            {"_id": run_id, f"{field}.status": {"$ne": "done"}}, update,
            projection={"agent_id": 1, "session_id": 1, "user_ids": 1, "created_at": 1})
        if run is None:
            self.require_run(run_id)
            return False
        if record.usage.by_model:  # rolled up by the one call that completed the stage
            at = record.finished_at or record.started_at or run["created_at"]
            self.parts.rollups.add_rollups(increments(run["agent_id"], run.get("session_id"), run.get("user_ids") or [], stage,
                                        day_of(at), record.usage.by_model))
        return True

    def fail_stage(self, run_id: str, stage: str, error: str, now: datetime) -> None:
        field = _stage_field(stage)
        result = self.col("runs").update_one(
            {"_id": run_id, f"{field}.status": {"$ne": "done"}},
            {"$set": _under(field, c.failed_fields(error, now))},
        )
        if result.matched_count == 0:
            self.require_run(run_id)

    def reopen_run(
        self, run_id: str, now: datetime, lease_s: float, *, reset_attempts: bool = False
    ) -> FormationRun | None:
        runs, sessions = self.col("runs"), self.col("sessions")
        doc = runs.find_one({"_id": run_id})
        run = run_from(doc)
        if run is None or run.status in c.FINAL_RUN_STATUSES:
            return None
        now = c.utc(now)
        if run.status in c.ACTIVE_RUN_STATUSES and run.lease_expires_at is not None and run.lease_expires_at > now:
            return None  # its worker still holds a live lease
        session = self.parts.ingest.get_session(run.session_id)
        if doc.get("_claim_pending"):
            if session is None or session.active_run_id != run_id:
                runs.delete_one({"_id": run_id, "_claim_pending": True})  # it never got its range
                return None
        if session is not None and session.active_run_id not in (None, run_id):
            if self.claim_holder(session) is not None:
                return None  # another live run holds the session; retried later
        until = c.lease_until(now, lease_s)
        if session is not None:
            taken = sessions.find_one_and_update(
                {"_id": run.session_id, "active_run_id": session.active_run_id},
                {"$set": {"active_run_id": run_id, "lease_expires_at": until}},
            )
            if taken is None:
                return None  # the session moved meanwhile
        attempts = 1 if reset_attempts else run.attempts + 1
        reopened = runs.find_one_and_update(
            {"_id": run_id, "status": run.status, "attempts": run.attempts},
            {"$set": {"status": "claimed", "attempts": attempts, "lease_expires_at": until, "finished_at": None},
             "$unset": {"_claim_pending": ""}},
            return_document=ReturnDocument.AFTER,
        )
        return run_from(reopened)

    def find_stale_runs(self, now: datetime, limit: int) -> list[FormationRun]:
        docs = self.col("runs").find(
            {"$or": [
                {"status": {"$in": list(c.ACTIVE_RUN_STATUSES)}, "lease_expires_at": {"$lt": c.utc(now)}},
                {"status": "failed"},
            ]},
            sort=[("created_at", 1), ("_id", 1)], limit=limit,
        )
        return [run_from(d) for d in docs]

    def list_runs(
        self, *, status: str | None = None, agent_id: str | None = None,
        session_id: str | None = None, limit: int = 50,
    ) -> list[FormationRun]:
        query = {k: v for k, v in (("status", status), ("agent_id", agent_id), ("session_id", session_id))
                 if v is not None}
        docs = self.col("runs").find(query, sort=[("created_at", DESCENDING), ("_id", DESCENDING)], limit=limit)
        return [run_from(d) for d in docs]

    def claim_holder(self, session: SessionState) -> FormationRun | None:
        if session.active_run_id is None:
            return None
        holder = self.get_run(session.active_run_id)
        return holder if holder is not None and holder.status in c.ACTIVE_RUN_STATUSES else None

    def try_claim(
        self, session_id: str, rule: ClaimRule, run: FormationRun, now: datetime, lease_s: float
    ) -> FormationRun | None:
        sessions, runs = self.col("sessions"), self.col("runs")
        for _ in range(CAS_ATTEMPTS):
            session = self.parts.ingest.get_session(session_id)
            if session is None or session.agent_id != run.agent_id:
                return None
            if session.active_run_id is not None and self.claim_holder(session) is None:
                # The holder finished or failed without releasing (a crash): free the claim.
                sessions.update_one({"_id": session_id, "active_run_id": session.active_run_id},
                                    {"$set": {"active_run_id": None, "lease_expires_at": None}})
                continue
            if session.active_run_id is not None:
                return None
            if self.parts.ingest.count_uncounted(session_id):
                continue  # a message stored but not counted (its ingest died) joins the range
            if not c.rule_holds(session, rule):
                return None
            stored = c.claimed_run(session, run, now, lease_s)
            pending = escape_keys(to_doc(stored, stored.run_id))
            pending["_claim_pending"] = True
            try:
                runs.insert_one(pending)
            except DuplicateKeyError:
                return None  # a run id is used once
            won = sessions.find_one_and_update(
                {"_id": session_id, "last_seq": session.last_seq, "claimed_through": session.claimed_through,
                 "active_run_id": None},
                {"$set": {"claimed_through": session.last_seq, "messages_since": 0, "tokens_since": 0.0,
                          "active_run_id": stored.run_id, "lease_expires_at": stored.lease_expires_at}},
            )
            if won is None:
                runs.delete_one({"_id": stored.run_id, "_claim_pending": True})
                continue  # the session moved: re-read and re-check the rule
            runs.update_one({"_id": stored.run_id}, {"$unset": {"_claim_pending": ""}})
            return stored
        return None

    def _release(self, run: FormationRun, *, watermark: bool) -> None:
        sessions = self.col("sessions")
        if watermark:
            sessions.update_one({"_id": run.session_id}, {"$max": {"watermark": run.seq_to}})
        sessions.update_one({"_id": run.session_id, "active_run_id": run.run_id},
                            {"$set": {"active_run_id": None, "lease_expires_at": None}})

    def finish_run(self, run_id: str, now: datetime, totals: dict, changed_scope_keys: Sequence[str]) -> bool:
        run = self.require_run(run_id)
        if run.status == "done":
            self._release(run, watermark=True)  # completes a finish interrupted after its flip
            return False
        # Effects first, then the flip: a crash in between leaves a stale run whose rerun
        # repeats only idempotent steps (a second stamp bump merely invalidates caches).
        self._release(run, watermark=True)
        self.parts.leases.bump_scope_versions(run.agent_id, changed_scope_keys)
        flipped = self.col("runs").find_one_and_update(
            {"_id": run_id, "status": {"$ne": "done"}},
            {"$set": {"status": "done", "finished_at": c.utc(now), "totals": escape_keys(dict(totals)),
                      "lease_expires_at": None, "error": None}},
        )
        return flipped is not None

    def fail_run(self, run_id: str, error: str, now: datetime, *, dead: bool) -> None:
        run = self.require_run(run_id)
        if run.status == "done":
            return
        self._release(run, watermark=False)
        self.col("runs").update_one(
            {"_id": run_id, "status": {"$ne": "done"}},
            {"$set": {"status": "dead" if dead else "failed", "error": error, "lease_expires_at": None,
                      "finished_at": c.utc(now)}},
        )
