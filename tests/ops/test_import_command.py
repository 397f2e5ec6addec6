"""``memoryctl curate add-fact`` / ``add-reflection`` and ``memoryctl import`` (design §13
"Direct writes and import"): an owner writes memory verbatim from the command line, and imports
a JSON Lines file: each rejected line printed with its number and field, every good line kept,
the same file imported twice adding nothing."""

from __future__ import annotations

import json

from ops import cli
# the curation commands' store: agent A with a shared fact f1 ("The launch budget is 12,000 euros")
from tests.ops.test_curate_command import store  # noqa: F401


def test_an_owner_adds_facts_and_reflections_verbatim_and_a_repeat_names_the_holder(store, capsys):
    assert cli.main(["curate", "add-fact", "A", "--text", "The venue has a roof terrace", "--category", "projects",
                     "--json"]) == 0
    added = json.loads(capsys.readouterr().out)
    [stored] = store.facts.get_facts([added["id"]])
    assert (stored.scope_key, stored.source, stored.categories) == ("agent", "owner", ["projects"])
    assert cli.main(["curate", "add-fact", "A", "--text", "the launch budget is 12,000 EUROS"]) == 2
    assert "--text: fact f1 already says this" in capsys.readouterr().err
    assert cli.main(["curate", "add-fact", "A", "--user", "maya", "--text", "Maya is vegetarian",
                     "--expires", "2027-03-10T00:00:00Z"]) == 0
    assert store.facts.list_facts("A", "user:maya")[0].expires_at.year == 2027
    assert cli.main(["curate", "add-fact", "A", "--text", "x is y", "--expires", "next week"]) == 2
    assert "--expires" in capsys.readouterr().err
    assert cli.main(["curate", "add-fact", "A", "--text", "x is z", "--category", "billing"]) == 2
    assert "--category[0]: 'billing' is not one of the agent's categories" in capsys.readouterr().err
    capsys.readouterr()
    assert cli.main(["curate", "add-reflection", "A", "--session", "s1", "--text", "Keep the recap short"]) == 2
    assert "memoryctl curate: --session: no such session (erased, or never stored): 's1'" in capsys.readouterr().err
    assert cli.main(["curate", "edit-section", "A", "tone", "--session", "s1", "--line", "Short"]) == 2
    assert "--session: no such session" in capsys.readouterr().err
    assert store.reflections.unabsorbed_reflections("A", "session:s1") == [] and store.blobs.get_blob("A", "session:s1") is None
    store.ingest.declare_session_users("s1", "A", ["maya"])   # the platform started it
    assert cli.main(["curate", "add-reflection", "A", "--session", "s1", "--text", "Keep the recap short"]) == 0
    assert [r.content for r in store.reflections.unabsorbed_reflections("A", "session:s1")] == ["Keep the recap short"]


def test_an_owner_adds_a_fact_with_metadata_of_the_agents_filterable_keys(store, capsys):
    assert cli.main(["metadata-keys", "set", "A", "project", "tier"]) == 0
    assert cli.main(["curate", "add-fact", "A", "--text", "The venue has a roof terrace", "--meta", "project=apollo",
                     "--meta", "tier=2", "--json"]) == 0
    added = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert store.facts.get_facts([added["id"]])[0].metadata == {"project": "apollo", "tier": 2}
    assert cli.main(["curate", "add-fact", "A", "--text", "The venue has a lift", "--meta", "plan=pro"]) == 2
    assert "--meta plan: is not one of the agent's filterable keys: project, tier" in capsys.readouterr().err


def test_an_import_prints_each_rejected_line_keeps_the_good_ones_and_adds_nothing_twice(store, capsys, tmp_path):
    path = tmp_path / "crm.jsonl"
    rows = [{"user_id": "maya", "text": "Maya renews her contract in June", "import_key": "crm-1"},
            {"user_id": "tom", "text": "Tom's team has twelve seats", "categories": ["finance"]},
            {"user_id": "tom", "text": "Tom's gate code is 4512"},
            {"user_id": "", "text": "nobody"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{oops\n", encoding="utf-8")
    assert cli.main(["import", str(path), "--agent", "A"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("line 3: text: the text carries an access code")
    assert out[1].startswith("line 4: user_id: ") and out[2].startswith("line 5: line: not JSON")
    assert out[3] == (f"imported {path}: 2 added (2 fact), 0 updated, 0 unchanged, 0 held by another item, "
                      "0 skipped, 3 rejected")
    assert [f.content for f in store.facts.list_facts("A", "user:tom")] == ["Tom's team has twelve seats"]
    assert cli.main(["import", str(path), "--agent", "A", "--json"]) == 1
    again = json.loads(capsys.readouterr().out)
    assert (again["added"], again["unchanged"], again["rejected"]) == (0, 2, 3)
    assert [r["line"] for r in again["rejects"]] == [3, 4, 5]
    assert "import" in {e.action for e in store.access.list_audit()}


def test_an_import_of_a_missing_file_is_one_clear_line(store, capsys, tmp_path):
    assert cli.main(["import", str(tmp_path / "nope.jsonl"), "--agent", "A"]) == 2
    assert "FILE: cannot read" in capsys.readouterr().err


def test_an_import_says_which_lines_met_a_retired_fact_and_counts_updates(store, capsys, tmp_path):
    path = tmp_path / "crm.jsonl"
    row = {"user_id": "maya", "text": "Maya renews in June", "import_key": "crm-1"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert cli.main(["import", str(path), "--agent", "A"]) == 0
    path.write_text(json.dumps({**row, "text": "Maya renews in July"}) + "\n", encoding="utf-8")
    assert cli.main(["import", str(path), "--agent", "A", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["updated"] == 1
    [fact] = [f for f in store.facts.list_facts("A", "user:maya") if "renews" in f.content]
    assert store.facts.retire_fact(fact.fact_id, fact.updated_at, "r-later", reason="contradicted")
    path.write_text(json.dumps({**row, "text": "Maya renews in August"}) + "\n", encoding="utf-8")
    assert cli.main(["import", str(path), "--agent", "A"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("line 1: skipped: the fact under this key was retired (contradicted)")
    assert out[1].endswith("0 held by another item, 1 skipped, 0 rejected")
    assert "August" not in " ".join(f.content for f in store.facts.list_facts("A", "user:maya", include_retired=True))
