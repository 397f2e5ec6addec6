"""The offline rules name a speaker once per sentence: "Maya Chen will be using you to plan
Maya Chen's product launch" reads as if two people were meant. Golden cases of the first ->
third person rewrite, and the demo sample and LoCoMo dev checked for any output that names its
subject again as a possessive."""

from __future__ import annotations

import json
import re

import pytest

from pipeline.llm.offline_rules.language import third_person
from tests.pipeline.llm.test_offline_golden import DEMO, _form, _locomo_sessions, _message


@pytest.mark.parametrize(("sentence", "name", "plural", "expected"), [
    ("I'll be using you to plan our product launch.", "Maya Chen", True,
     "Maya Chen will be using you to plan their product launch."),
    ("I lost my job at the engineering company.", "Alice", False, "Alice lost their job at the engineering company."),
    ("I told my team to call me on Fridays.", "Alice", False, "Alice told their team to call them on Fridays."),
    ("We moved our office to Porto.", "Tom", True, "Tom and others moved their office to Porto."),
    ("My sister and my mom live in Lyon.", None, False, "The user's sister and their mom live in Lyon."),
    # a first mention stays a name, whatever its form
    ("My email is maya@lumen.example.", "Maya Chen", False, "Maya Chen's email is maya@lumen.example."),
    ("Send it to me.", "Alice", False, "Send it to Alice."),
    ("I prefer Slack over email, message me there with updates.", "Tom", False,
     "Tom prefers Slack over email, message them there with updates."),
    ("I live in Porto and I work at Lumen Labs.", "Alice", False, "Alice lives in Porto and Alice works at Lumen Labs."),
])
def test_the_speaker_is_named_once_then_their_and_them(sentence, name, plural, expected):
    assert third_person(sentence, name, plural=plural) == expected


def _names_itself(text: str) -> bool:
    """A name that comes back as its own possessive: "Maya Chen ... Maya Chen's"."""
    return any(re.search(rf"\b{re.escape(name)}\b(?!'s).*\b{re.escape(name)}'s\b", text)
               for name in set(re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)?", text)))


def _demo_formed() -> list[tuple[str, str, str]]:
    """Every fact and reflection the offline rules form from the demo sample, session by session."""
    sessions: dict[str, list[dict]] = {}
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "message.added":
            sessions.setdefault(event["session_id"], []).append(event)
    formed = []
    for events in sessions.values():
        users = events[0]["session_users"]
        formed += _form([
            _message(i, e["message"].get("sender_name") or e["agent_name"], e["message"]["content"],
                     human=e["message"]["role"] == "user", users=users, sender_id=e["message"].get("sender_id"))
            for i, e in enumerate(events)
        ])
    return formed


def test_the_demo_sample_names_no_speaker_twice():
    formed = _demo_formed()
    assert ("reflection", "user", "Maya Chen will be using Juniper to plan their product launch") in formed
    assert [text for _, _, text in formed if _names_itself(text)] == []


_CONNECTIVE = re.compile(r"^(?:And|But|So|Also|Plus)\b")
_FRAME = re.compile(r"\b(?:asks|says|said|told us):", re.IGNORECASE)


def test_the_demo_sample_forms_no_connective_no_reporting_frame_and_no_you():
    """What a person reads in the demo's memory (the inspector, the context): each item alone,
    in memory's own words. A session request is a quote of what was asked ("Maya Chen
    requested: ...") and keeps its words."""
    odd = [text for _, _, text in _demo_formed() if _CONNECTIVE.match(text) or _FRAME.search(text)
           or (" requested: " not in text and re.search(r"\byour?\b", text, re.IGNORECASE))]
    assert odd == []


def test_locomo_one_to_one_sessions_name_no_speaker_twice():
    odd, formed = [], 0
    for name, speakers, turns in _locomo_sessions():
        for user in speakers:
            messages = [_message(i, t["speaker"], t["text"], human=t["speaker"] == user, users=[user.lower()])
                        for i, t in enumerate(turns)]
            outputs = _form(messages)
            formed += len(outputs)
            odd += [(name, user, text) for _, _, text in outputs if _names_itself(text)]
    assert formed > 300
    assert odd == []
