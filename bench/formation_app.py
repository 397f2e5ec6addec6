"""Bench-only worker bootstrap for ``python -m bench.formation``:
``celery -A bench.formation_app worker ...`` is ``workers.app`` whose clients are the ones
from settings except the LLM, a scripted one with a fixed latency per call
(``BENCH_LLM_LATENCY_S``, default 0.2). Production settings never select it. With
``BENCH_LLM_WIRE=1`` the LLM is the one of the settings too (the OpenAI adapter at
``MEMORY_OPENAI_BASE_URL``), and ``wire_answer`` answers for it on the wire-level fake server
(``testkit.llm_server``), the same answers as the scripted LLM's, read from the prompts.

The scripted answers make every stage of every formation do real work: one user fact that
updates a seeded one (so decide_facts asks the LLM), four session reflections (so the session
scope is consolidated), and a faithful merge.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from celery.signals import worker_process_init

import workers.deps as worker_deps  # its per-process reset runs before the hook below
from pipeline.llm.scripted import ScriptedLLM
from pipeline.prompts.consolidation import BlobSection, ConsolidationAnswer
from pipeline.prompts.dedup import DecisionsAnswer, FactDecision
from pipeline.prompts.facts import ExtractedFact, FactsAnswer
from pipeline.prompts.reflections import ReflectionItem, ReflectionsAnswer
from schemas.settings import get_settings
from testkit.llm_server import Answer
from workers.app import app

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


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


def wire_answer(body: dict, delay_s: float) -> Answer:
    """The fake server's answer to one chat request of the bench's formations, after
    ``delay_s``: the operation from the answer schema's name, the user and aliases from the
    prompt (the bench's conversations give each user an @example.org address)."""
    schema = body["response_format"]["json_schema"]["name"]
    prompt = body["messages"][-1]["content"]
    user = re.search(r"([\w.-]+)@example\.org", prompt).group(1) if "@example.org" in prompt else ""
    if schema == "FactsAnswer":
        answer: dict = {"facts": [{"scope": "user", "text": fact_text(user, "example.org")}]}
    elif schema == "DecisionsAnswer":
        pairs = re.findall(r"NEW (\d+): .*?\n\s+existing (\d+):", prompt)
        answer = {"decisions": [{"new": int(new), "action": "UPDATE", "existing": int(existing),
                                 "text": fact_text(user, "example.org")} for new, existing in pairs]}
    elif schema == "ReflectionsAnswer":
        answer = {"agent": [], "user": [], "session": [
            {"text": f"{user} asked for step {k} of the plan", "sources": [0]} for k in range(4)]}
    else:  # ConsolidationAnswer: every new reflection kept (the first consolidation of a session)
        listed = prompt.split("NEW REFLECTIONS (oldest first):\n", 1)[1].split("\n\n", 1)[0]
        answer = {"sections": [{"name": "REQUESTS", "bullets": re.findall(r"^\d+\. (.*)$", listed, re.MULTILINE)}]}
    return Answer(json.dumps(answer), delay_s=delay_s)


def shipped_threads() -> int:
    """The formation worker's ``--concurrency`` in docker-compose.yml (its threads pool)."""
    command = re.search(r'"-Q", "formation",.*?"--concurrency", "(\d+)"', COMPOSE.read_text(), re.DOTALL)
    return int(command.group(1))


def wire_llm(latency_ms: float):
    """The fake provider of ``--llm-latency-ms``, started, and the worker environment that
    points the OpenAI adapter at it."""
    from testkit.llm_server import LLMServer

    server = LLMServer().respond(lambda body: wire_answer(body, latency_ms / 1000)).start()
    env = {"MEMORY_LLM_PROVIDER": "openai", "OPENAI_API_KEY": server.openai_key,
           "MEMORY_OPENAI_BASE_URL": server.openai_base_url, "BENCH_LLM_WIRE": "1"}
    return server, env


def _install(**_: object) -> None:
    deps = worker_deps.Deps(get_settings())
    if os.environ.get("BENCH_LLM_WIRE") != "1":
        deps.__dict__["llm"] = bench_llm(float(os.environ.get("BENCH_LLM_LATENCY_S", "0.2")))
    worker_deps.set_deps(deps)


_install()
worker_process_init.connect(_install, weak=False)

__all__ = ["app"]
