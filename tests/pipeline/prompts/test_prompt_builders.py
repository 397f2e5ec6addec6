"""The prompt builders: each request carries what its operation needs, and nothing it must not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.conversation import render_conversation
from pipeline.errors import InvalidInput
from pipeline.llm.structured import strict_schema
from pipeline.prompts.consolidation import ConsolidationAnswer, build_consolidation_request
from pipeline.prompts.dedup import DecisionsAnswer, build_dedup_request
from pipeline.prompts.facts import FactsAnswer, build_facts_request, fact_scopes
from pipeline.prompts.reflections import ReflectionsAnswer, build_reflections_request

# --- extract_facts -------------------------------------------------------------------------------


def facts_request(messages, *, user_scope=True, agent_scope=True):
    return build_facts_request(
        render_conversation(messages), messages, user_scope=user_scope, agent_scope=agent_scope,
        agent_name="Mars Bot", user_names={"u1": "Alice", "u2": "Bob"}, model="fast-model",
    )


def test_facts_request_carries_operation_model_answer_schema_and_conversation(one_to_one):
    request = facts_request(one_to_one)
    assert (request.operation, request.model, request.response_model) == ("extract_facts", "fast-model", FactsAnswer)
    assert render_conversation(one_to_one) in request.prompt
    assert "Mars Bot" in request.prompt
    assert [m["content"] for m in request.inputs["messages"]] == [m.content for m in one_to_one]


@pytest.mark.parametrize(
    ("chat", "user_scope", "agent_scope", "scopes"),
    [
        ("one_to_one", True, True, ["user", "agent"]),
        ("one_to_one", False, True, ["agent"]),
        ("one_to_one", True, False, ["user"]),
        ("group_chat", True, True, ["agent"]),
        ("group_chat", False, True, ["agent"]),
    ],
)
def test_facts_request_offers_user_scope_only_when_enabled_and_not_a_group_chat(
    request, chat, user_scope, agent_scope, scopes
):
    messages = request.getfixturevalue(chat)
    built = facts_request(messages, user_scope=user_scope, agent_scope=agent_scope)
    assert built.inputs["scopes"] == scopes
    assert built.inputs["group_chat"] is (chat == "group_chat")
    for scope in ("user", "agent"):
        offered = f'- "{scope}":' in built.prompt
        assert offered is (scope in scopes)
        if scope not in scopes:
            assert f'Never use scope "{scope}"' in built.prompt


@pytest.mark.parametrize(
    ("chat", "user_scope", "agent_scope"),
    [("one_to_one", False, False), ("group_chat", True, False)],
)
def test_facts_request_without_any_scope_is_refused_so_the_call_is_skipped(request, chat, user_scope, agent_scope):
    messages = request.getfixturevalue(chat)
    assert fact_scopes(messages, user_scope=user_scope, agent_scope=agent_scope) == []
    with pytest.raises(InvalidInput, match="skip"):
        facts_request(messages, user_scope=user_scope, agent_scope=agent_scope)


@pytest.mark.parametrize(
    "criterion",
    ["atomic", "objective", "enduring", "specific", "searchable", "at most 30 words", "who / what / where / when",
     "preferences", "ephemeral", "opinions"],
)
def test_facts_system_prompt_states_each_criterion_of_a_fact(one_to_one, criterion):
    assert criterion in facts_request(one_to_one).system


def test_facts_prompt_names_the_humans_from_the_map_or_the_events(one_to_one):
    built = build_facts_request(render_conversation(one_to_one), one_to_one, user_scope=True, agent_scope=True,
                                agent_name=None, user_names={}, model="m")
    assert "Humans in this conversation: Alice." in built.prompt
    assert '"user": a fact about Alice' in built.prompt
    assert "The agent has no display name." in built.prompt


def test_group_chat_facts_prompt_says_why_user_scope_is_absent(group_chat):
    assert "group chat" in facts_request(group_chat).prompt


# --- decide_facts --------------------------------------------------------------------------------

NEW = ["Alice's email is alice@new.com", "Alice lives in Tucson"]
CANDIDATES = {0: [(7, "Alice's email is alice@old.com")], 1: [(8, "Alice lives in Denver"), (7, "Alice's email is alice@old.com")]}


def test_dedup_request_shows_integer_aliases_of_new_and_candidate_facts():
    request = build_dedup_request(NEW, CANDIDATES, model="fast-model")
    assert (request.operation, request.response_model) == ("decide_facts", DecisionsAnswer)
    assert 'NEW 0: "Alice\'s email is alice@new.com"' in request.prompt
    assert 'existing 7: "Alice\'s email is alice@old.com"' in request.prompt
    assert 'existing 8: "Alice lives in Denver"' in request.prompt
    assert request.inputs["items"] == [
        {"new": 0, "text": NEW[0], "candidates": [{"alias": 7, "text": "Alice's email is alice@old.com"}]},
        {"new": 1, "text": NEW[1], "candidates": [{"alias": 8, "text": "Alice lives in Denver"},
                                                  {"alias": 7, "text": "Alice's email is alice@old.com"}]},
    ]


@pytest.mark.parametrize("action", ['"ADD"', '"UPDATE"', '"DELETE"', '"NONE"', "one decision per new fact"])
def test_dedup_system_prompt_defines_every_action(action):
    assert action in build_dedup_request(NEW, CANDIDATES, model="m").system


def test_dedup_prompt_never_shows_real_ids():
    request = build_dedup_request(["Bob works at Acme"], {0: [(0, "Bob works at Acme Corp")]}, model="m")
    assert "fact_id" not in request.prompt and "65a1" not in request.prompt
    assert "one of the aliases listed under that same new fact" in request.system


@pytest.mark.parametrize(
    ("new_facts", "candidates", "field"),
    [
        ([], {}, "new_facts"),
        (["a fact"], {}, "candidates[0]"),
        (["a fact"], {0: []}, "candidates[0]"),
        (["a fact"], {0: [(1, "x")], 3: [(2, "y")]}, "candidates"),
        (["a", "b"], {0: [(1, "x")], 1: [(1, "not x")]}, "candidates[1]"),
    ],
)
def test_dedup_request_refuses_inconsistent_aliases(new_facts, candidates, field):
    with pytest.raises(InvalidInput) as caught:
        build_dedup_request(new_facts, candidates, model="m")
    assert caught.value.field == field


# --- extract_reflections -------------------------------------------------------------------------

BLOBS = {
    "agent": "VERSION: 2\n[PROJECTS]\n- AGENT-BLOB-LINE",
    "user": "VERSION: 1\n[PREFERENCES]\n- USER-BLOB-LINE",
    "session": "VERSION: 1\n[SESSION STATE]\n- SESSION-BLOB-LINE",
}
BUFFER = {"agent": ["AGENT-BUFFERED"], "user": ["USER-BUFFERED"], "session": ["SESSION-BUFFERED"]}


def reflections_request(messages, scopes):
    return build_reflections_request(
        messages, scopes=scopes, blobs=BLOBS, unabsorbed=BUFFER,
        new_facts=["Alice's email is alice@example.com"], model="tier-model",
    )


def test_the_reflections_schema_admits_only_citations_of_the_conversations_aliases(one_to_one):
    # a server that holds its answer to the schema cannot then send what check_sources refuses
    model = reflections_request(one_to_one, ["agent", "user", "session"]).response_model
    last = len(one_to_one) - 1
    sources = strict_schema(model)["$defs"]["ReflectionItem"]["properties"]["sources"]
    assert (sources["minItems"], sources["maxItems"]) == (1, last + 1)
    assert (sources["items"]["minimum"], sources["items"]["maximum"]) == (0, last)
    for cited in ([], [last + 1], [-1]):
        with pytest.raises(ValidationError):
            model.model_validate({"agent": [{"text": "Alice likes tea.", "sources": cited}], "user": [], "session": []})
    kept = model.model_validate({"agent": [{"text": "Alice likes tea.", "sources": [0, last]}], "user": [], "session": []})
    assert kept.agent[0].sources == [0, last]


@pytest.mark.parametrize(
    ("chat", "scopes", "levels"),
    [
        ("one_to_one", ["agent", "user", "session"], ["agent", "user", "session"]),
        ("one_to_one", ["session", "user", "agent"], ["agent", "user", "session"]),
        ("one_to_one", ["user", "session"], ["user", "session"]),
        ("one_to_one", ["agent", "session"], ["agent", "session"]),
        ("one_to_one", [], ["session"]),
        ("group_chat", ["agent", "user", "session"], ["agent", "session"]),
        ("group_chat", ["user", "session"], ["session"]),
    ],
)
def test_reflections_request_forms_enabled_levels_in_order_and_leaves_the_others_out(request, chat, scopes, levels):
    messages = request.getfixturevalue(chat)
    built = reflections_request(messages, scopes)
    assert built.operation == "extract_reflections" and issubclass(built.response_model, ReflectionsAnswer)
    assert built.inputs["scopes"] == levels
    for level in ("agent", "user", "session"):
        tag = level.upper()
        shown = f"{tag}-BLOB-LINE" in built.prompt
        assert shown is (level in levels)
        assert (f"{tag}-BUFFERED" in built.prompt) is (level in levels)
        assert (level in built.inputs["blobs"]) is (level in levels)
        assert (f'- "{level}" (' in built.system) is (level in levels)


def test_reflections_prompt_lists_levels_top_down_with_the_new_facts_not_to_repeat(one_to_one):
    built = reflections_request(one_to_one, ["agent", "user", "session"])
    positions = [built.prompt.index(f"== {level} level ==") for level in ("agent", "user", "session")]
    assert positions == sorted(positions)
    assert "- Alice's email is alice@example.com" in built.prompt
    assert "do not repeat" in built.prompt
    assert "at most 35 words" in built.system
    assert built.inputs["new_facts"] == ["Alice's email is alice@example.com"]


def test_reflections_prompt_shows_blobs_without_a_providers_source_note(one_to_one):
    blobs = {"user": "VERSION: 1\n[PREFERENCES]\n- Alice prefers tea\n[SOURCE]\n- Formed by the offline rules provider"}
    built = build_reflections_request(one_to_one, scopes=["user", "session"],
                                      blobs=blobs, unabsorbed={}, new_facts=[], model="m")
    assert "- Alice prefers tea" in built.prompt
    assert "offline rules provider" not in built.prompt
    assert built.inputs["blobs"] == {"user": "VERSION: 1\n[PREFERENCES]\n- Alice prefers tea"}


def test_reflections_inputs_name_users_from_the_map_when_events_do_not(one_to_one):
    unnamed = [m.model_copy(update={"sender_name": None}) for m in one_to_one]
    built = build_reflections_request(unnamed, scopes=["session"], blobs={},
                                      unabsorbed={}, new_facts=[], model="m", user_names={"u1": "Alice"})
    assert {m["sender_name"] for m in built.inputs["messages"] if m["role"] == "user"} == {"Alice"}


def test_reflections_request_refuses_an_unknown_level(one_to_one):
    with pytest.raises(InvalidInput, match="unknown reflection levels"):
        reflections_request(one_to_one, ["agent", "team"])


# --- consolidate ---------------------------------------------------------------------------------

CURRENT = "VERSION: 3\n[PREFERENCES]\n- Alice prefers short answers\n[GOALS]\n- Alice is learning Rust"


def test_consolidation_request_carries_blob_reflections_in_order_and_word_limit():
    built = build_consolidation_request("user", CURRENT, ["first", "second"], word_limit=300, model="tier-model")
    assert (built.operation, built.response_model) == ("consolidate", ConsolidationAnswer)
    assert CURRENT in built.prompt
    assert built.prompt.index("1. first") < built.prompt.index("2. second")
    assert "300 words" in built.system and "300 words" in built.prompt
    assert built.inputs["current_version"] == 3
    assert [s["name"] for s in built.inputs["current_sections"]] == ["PREFERENCES", "GOALS"]
    assert built.inputs["excess_words"] is None
    assert "over the limit" not in built.prompt


@pytest.mark.parametrize(
    "rule",
    ["newer information wins", "invent nothing", "keep every existing section", "drop what is outdated",
     "counting section headers"],
)
def test_consolidation_system_prompt_states_each_merge_rule(rule):
    assert rule in build_consolidation_request("agent", "", ["x"], word_limit=1200, model="m").system


@pytest.mark.parametrize(("excess", "limit"), [(1, 200), (57, 300), (400, 1200)])
def test_a_consolidation_retry_states_the_excess(excess, limit):
    built = build_consolidation_request("session", CURRENT, ["x"], word_limit=limit, model="m", excess_words=excess)
    assert f"{excess} word(s) over the limit of {limit}" in built.prompt
    assert built.inputs["excess_words"] == excess


def test_a_consolidation_retry_names_the_sections_the_last_answer_left_out():
    built = build_consolidation_request("user", CURRENT, ["x"], word_limit=300, model="m", missing_sections=["GOALS"])
    assert "left out the existing section(s) [GOALS]" in built.prompt
    assert "outdated_sections" in built.prompt
    assert built.inputs["missing_sections"] == ["GOALS"]


def test_the_system_prompt_says_how_to_leave_an_outdated_section_out():
    assert "name it in outdated_sections" in build_consolidation_request("user", "", ["x"], word_limit=300, model="m").system


def test_a_providers_source_note_is_not_shown_as_memory_to_merge():
    blob = CURRENT + "\n[SOURCE]\n- Formed by the offline rules provider (offline-rules-v1), not by a language model."
    built = build_consolidation_request("user", blob, ["x"], word_limit=300, model="m")
    assert CURRENT in built.prompt
    assert "[SOURCE]" not in built.prompt and "offline rules provider" not in built.prompt
    assert [s["name"] for s in built.inputs["current_sections"]] == ["PREFERENCES", "GOALS"]
    assert built.inputs["current_blob"] == blob


def test_a_blob_from_the_previous_system_is_shown_in_the_blob_format():
    built = build_consolidation_request("user", "Alice likes tea.\nAlice has a cat.", ["x"], word_limit=300, model="m")
    assert "VERSION: 0\n[NOTES]\n- Alice likes tea.\n- Alice has a cat." in built.prompt


def test_a_first_consolidation_says_the_blob_is_empty():
    built = build_consolidation_request("session", "", ["x"], word_limit=200, model="m")
    assert "first consolidation" in built.prompt
    assert built.inputs["current_version"] == 0 and built.inputs["current_sections"] == []


@pytest.mark.parametrize(
    ("scope", "limit", "excess", "field"),
    [("team", 100, None, "scope"), ("user", 0, None, "word_limit"), ("user", 100, 0, "excess_words")],
)
def test_consolidation_request_refuses_bad_arguments(scope, limit, excess, field):
    with pytest.raises(InvalidInput) as caught:
        build_consolidation_request(scope, "", ["x"], word_limit=limit, model="m", excess_words=excess)
    assert caught.value.field == field
