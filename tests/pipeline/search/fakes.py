"""A small in-memory stand-in for the two repositories the local search reads (``facts`` for
the candidates, ``leases`` for the stamps): one object answers for both."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pipeline.store.port import FactCandidate

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class CandidateStore:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, FactCandidate, str | None]] = []  # agent, key, cand, model
        self.stamps: dict[tuple[str, str], int] = {}
        self.loads = 0
        self.facts = self.leases = self

    def add(self, agent_id, key, fact_id, content, embedding=None, model="m", minutes=0):
        scope = key.split(":", 1)[0]
        user = key.split(":", 1)[1] if scope == "user" else None
        cand = FactCandidate(fact_id, scope, user, content, embedding, T0 + timedelta(minutes=minutes))
        self.rows.append((agent_id, key, cand, model))

    def bump(self, agent_id, key):
        self.stamps[(agent_id, key)] = self.stamps.get((agent_id, key), 0) + 1

    def search_candidates(self, agent_id, scope_keys, embedding_model):
        self.loads += 1
        out = []
        for agent, key, cand, model in self.rows:
            if agent == agent_id and key in scope_keys:
                keep = embedding_model is not None and model == embedding_model
                out.append(cand if keep else FactCandidate(cand.fact_id, cand.scope, cand.user_id, cand.content, None, cand.formed_at))
        return out

    def get_scope_versions(self, agent_id, scope_keys):
        return {k: self.stamps.get((agent_id, k), 0) for k in scope_keys}

    def stamps_epoch(self):
        return 0
