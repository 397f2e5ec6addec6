import pytest

from pipeline.errors import InvalidLLMAnswer, PermanentError, RateLimited, TransientError
from pipeline.llm.port import LLMRequest
from pipeline.llm.scripted import Fault, ScriptedLLM, UnscriptedCall
from pipeline.prompts.dedup import DecisionsAnswer
from pipeline.prompts.facts import ExtractedFact, FactsAnswer


def _request(operation="extract_facts", model=FactsAnswer, **inputs):
    return LLMRequest(operation=operation, model="m-fast", system="sys", prompt="a prompt",
                      response_model=model, inputs=inputs)


FACTS = FactsAnswer(facts=[ExtractedFact(text="Alice lives in Berlin.", scope="user")])


def test_a_scripted_answer_model_is_returned_parsed_with_token_counts():
    llm = ScriptedLLM().on("extract_facts", FACTS)
    response = llm.complete(_request())
    assert response.parsed == FACTS
    assert response.provider == "scripted" and response.model == "m-fast"
    assert response.input_tokens > 0 and response.output_tokens > 0


def test_rules_match_by_operation_and_predicate_on_inputs():
    llm = (ScriptedLLM()
           .on("extract_facts", {"facts": []}, when=lambda inputs: inputs.get("session") == "quiet")
           .on("extract_facts", FACTS))
    assert llm.complete(_request(session="quiet")).parsed.facts == []
    assert llm.complete(_request(session="busy")).parsed == FACTS


def test_a_rule_with_times_applies_only_that_often_then_the_next_rule_answers():
    llm = ScriptedLLM().on("extract_facts", Fault("rate_limit", retry_after=2.5), times=1).on("extract_facts", FACTS)
    with pytest.raises(RateLimited) as caught:
        llm.complete(_request())
    assert caught.value.retry_after == 2.5
    assert llm.complete(_request()).parsed == FACTS


@pytest.mark.parametrize(
    ("kind", "error"),
    [("timeout", TransientError), ("rate_limit", RateLimited), ("server_error", TransientError),
     ("invalid_json", InvalidLLMAnswer), ("schema_violation", InvalidLLMAnswer), ("permanent", PermanentError)],
)
def test_each_fault_raises_the_error_a_real_provider_would(kind, error):
    llm = ScriptedLLM().on("*", Fault(kind))
    with pytest.raises(error):
        llm.complete(_request())


def test_a_raw_string_answer_is_validated_like_a_real_providers_answer():
    llm = ScriptedLLM().on("extract_facts", '{"facts": [{"text": "x", "scope": "session"}]}')
    with pytest.raises(InvalidLLMAnswer, match="scope"):
        llm.complete(_request())


def test_a_decision_naming_an_unknown_alias_is_returned_as_scripted_for_the_stage_to_reject():
    llm = ScriptedLLM().on("decide_facts", {"decisions": [{"new": 0, "action": "UPDATE", "existing": 99, "text": "t"}]})
    answer = llm.complete(_request("decide_facts", DecisionsAnswer, candidates={0: [1, 2]})).parsed
    assert answer.decisions[0].existing == 99


def test_a_callable_answer_sees_the_request():
    llm = ScriptedLLM().on("extract_facts", lambda req: {"facts": [{"text": req.inputs["say"], "scope": "agent"}]})
    assert llm.complete(_request(say="The office is in Oslo.")).parsed.facts[0].text == "The office is in Oslo."


def test_every_call_is_recorded_and_counted_including_faults():
    llm = ScriptedLLM().on("extract_facts", Fault("timeout"), times=1).on("extract_facts", FACTS)
    with pytest.raises(TransientError):
        llm.complete(_request(session="s1"))
    llm.complete(_request(session="s1"))
    assert llm.call_count == 2 and llm.count("extract_facts") == 2 and llm.count("consolidate") == 0
    assert [(c.operation, c.model, c.inputs, c.fault) for c in llm.calls] == [
        ("extract_facts", "m-fast", {"session": "s1"}, "timeout"),
        ("extract_facts", "m-fast", {"session": "s1"}, None),
    ]


def test_an_unscripted_call_fails_loudly_and_is_not_a_retryable_error():
    llm = ScriptedLLM().on("consolidate", FACTS)
    with pytest.raises(UnscriptedCall):
        llm.complete(_request("extract_facts"))
    assert not issubclass(UnscriptedCall, TransientError)


def _fault_pattern(seed):
    llm = ScriptedLLM(fault_rates={"transient": 0.3, "invalid": 0.1}, seed=seed).on("*", FACTS)
    outcome = []
    for _ in range(400):
        try:
            llm.complete(_request())
            outcome.append("ok")
        except InvalidLLMAnswer:
            outcome.append("invalid")
        except TransientError:
            outcome.append("transient")
    return outcome


def test_random_faults_follow_their_rates_and_repeat_with_the_same_seed():
    outcome = _fault_pattern(seed=11)
    assert outcome == _fault_pattern(seed=11)
    assert outcome != _fault_pattern(seed=12)
    assert 0.22 < outcome.count("transient") / 400 < 0.38
    assert 0.05 < outcome.count("invalid") / 400 < 0.16


def test_fault_rates_with_unknown_kinds_or_over_one_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        ScriptedLLM(fault_rates={"meteor": 0.1})
    with pytest.raises(ValueError, match="more than 1"):
        ScriptedLLM(fault_rates={"transient": 0.8, "invalid": 0.4})


def test_a_fixed_latency_is_slept_on_every_call(monkeypatch):
    from pipeline.llm import scripted

    slept = []
    monkeypatch.setattr(scripted.time, "sleep", slept.append)
    llm = ScriptedLLM(latency_s=0.2).on("*", FACTS)
    llm.complete(_request())
    llm.complete(_request("consolidate"))
    assert slept == [0.2, 0.2]
