"""Offline rules over real conversations: the LoCoMo dev sessions and the bundled demo sample
must not produce the odd outputs the rules once made.

- "<name> is <name>, ..." from an introduction with a clause after it;
- "we/our/us" statements of a one-to-one chat stored as agent knowledge (they are the
  speaker's affairs), or rewritten as someone's in a group chat (where they are the group's);
- an introduction to the room ("Team, meet Juniper, our planning assistant") as a reflection;
- praise or thanks whose only name is that of the person spoken to ("Wow, Caroline, that's
  so cool", "That's great, Mel") as a fact: it is about nothing named;
- a feeling or a thought told as something a speaker did ("Caroline felt so accepted"): what
  the speaker did is a fact about them, how they felt is not.

The LoCoMo data is read from ``../shared/data/locomo/dev.json`` next to the repository (the
main checkout's, for a worktree); it is never copied into the repository, and the tests that
need it skip with the path they looked for when it is missing.
"""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline.conversation import render_conversation
from pipeline.llm.offline import OfflineLLM
from pipeline.prompts.facts import build_facts_request
from pipeline.prompts.reflections import build_reflections_request
from schemas.documents import StoredMessage

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "ops" / "demo_data" / "launch_planning.jsonl"
T0 = datetime(2023, 5, 8, tzinfo=timezone.utc)
WE = re.compile(r"\b(?:[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'll|[Ww]e'd|[Oo]ur|[Oo]urs|[Uu]s)\b")
INTRODUCTION = re.compile(r"^(?:\w+\s*,\s*)?(?:meet|welcome|please welcome|say (?:hi|hello) to)\b", re.IGNORECASE)
# a feeling or a thought told as what someone did: "Caroline felt so accepted"
FEELING = re.compile(r"\b[A-Z][a-z]+(?: and others)? (?:just |also |really )?(?:felt|realized|realised|thought|wished|"
                     r"wondered|hoped)\b")


def _locomo_path() -> Path:
    """``../shared`` of the repository root; in a worktree, of the main checkout's root."""
    roots = [REPO]
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=REPO,
                                capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        roots.append(Path(common).parent)
    except (OSError, subprocess.SubprocessError):
        pass
    candidates = [root.parent / "shared" / "data" / "locomo" / "dev.json" for root in roots]
    found = next((p for p in candidates if p.exists()), None)
    if found is None:
        pytest.skip(f"LoCoMo dev data not found (looked for {', '.join(map(str, candidates))})")
    return found


def _repeats_its_subject(text: str) -> bool:
    """"Alice is Alice, ...": a subject that is its own predicate."""
    match = re.match(r"^(.+?) is (.+?)(?:,|$)", text)
    return bool(match and match.group(1).strip().casefold() == match.group(2).strip().casefold())


def _message(i: int, speaker: str, text: str, *, human: bool, users: list[str],
             sender_id: str | None = None) -> StoredMessage:
    return StoredMessage(
        agent_id="a", session_id="s", message_id=f"m{i}", event_id=f"e{i}", seq=i + 1,
        role="user" if human else "assistant", sender_id=(sender_id or speaker.lower()) if human else None,
        sender_name=speaker if human else None, content=text, created_at=T0 + timedelta(minutes=i),
        ingested_at=T0, session_users=users, agent_name=None if human else speaker,
    )


def _form(messages: list[StoredMessage]) -> list[tuple[str, str, str]]:
    """(kind, scope, text) of every fact and reflection the offline rules form."""
    llm, text = OfflineLLM(), render_conversation(messages)
    facts = llm.complete(build_facts_request(text, messages, user_scope=True, agent_scope=True, agent_name=None,
                                             user_names={}, model="offline")).parsed.facts
    answer = llm.complete(build_reflections_request(messages, scopes=["agent", "user", "session"], blobs={},
                                                    unabsorbed={}, new_facts=[f.text for f in facts],
                                                    model="offline")).parsed
    return [("fact", f.scope, f.text) for f in facts] + [
        ("reflection", level, t) for level in ("agent", "user", "session") for t in answer.texts(level)]


def _locomo_sessions():
    for conversation in json.loads(_locomo_path().read_text(encoding="utf-8")):
        c = conversation["conversation"]
        for key, turns in c.items():
            if re.fullmatch(r"session_\d+", key) and turns:
                yield f"{conversation['sample_id']}/{key}", (c["speaker_a"], c["speaker_b"]), turns


def _odd(outputs, *, one_to_one: bool) -> list[tuple[str, str, str]]:
    odd = []
    for kind, scope, text in outputs:
        if _repeats_its_subject(text):
            odd.append((kind, scope, text))
        elif one_to_one and scope == "agent" and WE.search(text):
            odd.append((kind, scope, text))
        elif not one_to_one and " and others" in text:
            odd.append((kind, scope, text))
        elif kind == "reflection" and INTRODUCTION.match(text):
            odd.append((kind, scope, text))
        elif kind == "fact" and FEELING.search(text) and not re.search(r"\d", text):
            odd.append((kind, scope, text))
    return odd


def test_locomo_one_to_one_sessions_form_none_of_the_odd_outputs():
    odd, formed = [], 0
    for name, speakers, turns in _locomo_sessions():
        for user in speakers:   # each speaker in turn is the human, the other the assistant
            messages = [_message(i, t["speaker"], t["text"], human=t["speaker"] == user, users=[user.lower()])
                        for i, t in enumerate(turns)]
            outputs = _form(messages)
            formed += len(outputs)
            odd += [(name, user, *o) for o in _odd(outputs, one_to_one=True)]
    assert formed > 300, "the rules formed almost nothing: the check would prove nothing"
    assert odd == []


def test_locomo_sessions_as_group_chats_keep_we_as_the_groups():
    odd, agent_we = [], 0
    for name, speakers, turns in _locomo_sessions():
        users = [s.lower() for s in speakers]
        messages = [_message(i, t["speaker"], t["text"], human=True, users=users) for i, t in enumerate(turns)]
        outputs = _form(messages)
        assert not [o for o in outputs if o[1] == "user"], name
        agent_we += sum(1 for _, scope, text in outputs if scope == "agent" and WE.search(text))
        odd += [(name, *o) for o in _odd(outputs, one_to_one=False)]
    assert agent_we > 10, "no group 'we' statement was formed: the check would prove nothing"
    assert odd == []


def _spoken_to_only(text: str, names: list[str]) -> bool:
    """A fact whose only name (after its first word) is a participant's, or a short form of
    one ("Mel" of "Melanie"), set off by a comma or ending it: "Wow, Caroline, that's cool"."""
    firsts = [n.split()[0].casefold() for n in names]
    capitalised = [w.strip("\"'().,!?;:") for w in text.split()[1:] if w[:1].isupper()]
    if re.search(r"\d", text) or not capitalised:
        return False
    if not all(any(n.startswith(w.casefold()) and len(w) >= 3 for n in firsts) for w in capitalised):
        return False
    return all(re.search(rf"(?:^|,\s*|\w\s+){re.escape(w)}\s*(?:[,!.?]|$)", text) for w in capitalised)


def test_locomo_group_sessions_form_no_fact_that_only_names_the_person_spoken_to():
    odd, facts = [], 0
    for name, speakers, turns in _locomo_sessions():
        users = [s.lower() for s in speakers]
        messages = [_message(i, t["speaker"], t["text"], human=True, users=users) for i, t in enumerate(turns)]
        formed = [text for kind, _, text in _form(messages) if kind == "fact"]
        facts += len(formed)
        odd += [(name, text) for text in formed if _spoken_to_only(text, list(speakers))]
    assert facts > 20, "the rules formed almost no fact: the check would prove nothing"
    assert odd == []


def test_the_demo_sample_forms_none_of_the_odd_outputs():
    sessions: dict[str, list[dict]] = {}
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "message.added":
            sessions.setdefault(event["session_id"], []).append(event)
    odd, formed = [], []
    for name, events in sessions.items():
        users = events[0]["session_users"]
        messages = [
            _message(i, e["message"].get("sender_name") or e["agent_name"], e["message"]["content"],
                     human=e["message"]["role"] == "user", users=users, sender_id=e["message"].get("sender_id"))
            for i, e in enumerate(events)
        ]
        outputs = _form(messages)
        formed += outputs
        odd += [(name, *o) for o in _odd(outputs, one_to_one=len(users) == 1)]
    assert odd == []
    texts = [text for _, _, text in formed]
    assert not [t for t in texts if "meet Juniper" in t]
    assert ("fact", "agent", "Our total budget for the event is 12,000 euros") in formed  # said in the group chat
