"""Bench-only worker bootstrap for ``python -m bench.formation``:
``celery -A bench.formation_app worker ...`` is ``workers.app`` whose clients are the ones
from settings except the LLM, a scripted one with a fixed latency per call
(``BENCH_LLM_LATENCY_S``, default 0.2). Production settings never select it.

The scripted answers make every stage of every formation do real work: one user fact that
updates a seeded one (so decide_facts asks the LLM), four session reflections (so the session
scope is consolidated), and a faithful merge.
"""

from __future__ import annotations

import os

from celery.signals import worker_process_init

import workers.deps as worker_deps  # its per-process reset runs before the hook below
from pipeline.llm.scripted import ScriptedLLM
from pipeline.prompts.consolidation import BlobSection, ConsolidationAnswer
from pipeline.prompts.dedup import DecisionsAnswer, FactDecision
from pipeline.prompts.facts import ExtractedFact, FactsAnswer
from pipeline.prompts.reflections import ReflectionItem, ReflectionsAnswer
from schemas.settings import get_settings
from workers.app import app


def fact_text(user_id: str, domain: str) -> str:
    return f"{user_id} email address is {user_id}@{domain}"


def _user(request) -> str:
    return next(m["sender_id"] for m in request.inputs["messages"] if m["role"] == "user")


def _facts(request) -> FactsAnswer:
    return FactsAnswer(facts=[ExtractedFact(scope="user", text=fact_text(_user(request), "example.org"))])


def _decide(request) -> DecisionsAnswer:
    return DecisionsAnswer(decisions=[
        FactDecision(new=i["new"], action="UPDATE", existing=i["candidates"][0]["alias"], text=i["text"])
        for i in request.inputs["items"]
    ])


def _reflect(request) -> ReflectionsAnswer:
    user = _user(request)
    return ReflectionsAnswer(agent=[], user=[], session=[
        ReflectionItem(text=f"{user} asked for step {k} of the plan", sources=[0]) for k in range(4)])


def _merge(request) -> ConsolidationAnswer:
    bullets = [b for s in request.inputs["current_sections"] for b in s["bullets"]] + request.inputs["reflections"]
    return ConsolidationAnswer(sections=[BlobSection(name="REQUESTS", bullets=bullets)])


def bench_llm(latency_s: float) -> ScriptedLLM:
    llm = ScriptedLLM(latency_s=latency_s)
    llm.on("extract_facts", _facts).on("decide_facts", _decide)
    llm.on("extract_reflections", _reflect).on("consolidate", _merge)
    return llm


def _install(**_: object) -> None:
    deps = worker_deps.Deps(get_settings())
    deps.__dict__["llm"] = bench_llm(float(os.environ.get("BENCH_LLM_LATENCY_S", "0.2")))
    worker_deps.set_deps(deps)


_install()
worker_process_init.connect(_install, weak=False)

__all__ = ["app"]
