"""Extraction files facts under the agent's categories (design §13 "Categories and metadata"):
the prompt lists the agent's list, the answer's names outside it are dropped alone and
counted, and an UPDATE keeps the fact's categories when its new text names none."""

from __future__ import annotations

from pipeline.formation import stages
from pipeline.owner.categories import DEFAULT_CATEGORIES
from pipeline.prompts.facts import FactsAnswer, FiledFact, FiledFactsAnswer
from usecases import categories
from testkit.documents import T0
from testkit.formation import ALICE_CHAT, facts

BUDGET = "The Mars Festival budget is $50,000"


def _run(env, *filed: tuple[str, list[str]]) -> tuple[str, list[str]]:
    prompts: list[str] = []

    def answer(request):
        prompts.append(request.prompt)
        return FiledFactsAnswer(facts=[FiledFact(scope="agent", text=t, categories=c) for t, c in filed])

    env.llm.on("extract_facts", answer)
    run_id = env.new_run(ALICE_CHAT)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    return run_id, prompts


def test_a_fact_keeps_the_listed_categories_its_answer_gave_and_loses_only_the_others(env):
    run_id, prompts = _run(env, (BUDGET, ["finance", "astrology", "projects", "finance"]))
    assert f"Categories you may file a fact under: {', '.join(DEFAULT_CATEGORIES)}." in prompts[0]
    assert [(f.content, f.categories) for f in env.live_facts()] == [(BUDGET, ["finance", "projects"])]
    assert env.store.runs.get_run(run_id).stages["extract_facts"].output["dropped"]["category_unknown"] == 1


def test_the_owners_list_is_the_one_the_next_extraction_files_under(env):
    categories.set_list(env.store.ingest, "agent-1", ["budgets", "venues"], by="owner", now=T0)
    _, prompts = _run(env, (BUDGET, ["finance", "budgets"]))
    assert "Categories you may file a fact under: budgets, venues." in prompts[0]
    assert [f.categories for f in env.live_facts()] == [["budgets"]]


def test_an_agent_without_categories_is_asked_for_none(env):
    categories.set_list(env.store.ingest, "agent-1", [], by="owner", now=T0)
    asked = []

    def answer(request):
        asked.append(request)
        return facts(("agent", BUDGET))

    env.llm.on("extract_facts", answer)
    run_id = env.new_run(ALICE_CHAT)
    for stage in (stages.extract_facts, stages.embed_facts, stages.decide_facts):
        stage(run_id, env)
    # the schema and prompt an agent had before categories: no field to fill, no list
    assert asked[0].response_model is FactsAnswer and "Categories you may" not in asked[0].prompt
    assert [f.categories for f in env.live_facts()] == [[]]
