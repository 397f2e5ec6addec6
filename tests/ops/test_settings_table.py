"""The settings table of docs/operations.md is generated from ``schemas/settings.py`` and kept in sync;
packaging and ignore files match the quick-start."""

from __future__ import annotations

import tomllib

from ops import settings_table
from testkit.procs import REPO_ROOT
from schemas.settings import Settings


def test_the_docs_settings_table_is_the_generated_one():
    page = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert settings_table.page_table(page) == settings_table.table(), (
        "docs/operations.md's settings table is out of date: run python -m ops.settings_table --write"
    )
    assert settings_table.main(["--check"]) == 0


def test_the_table_lists_every_memory_setting_with_its_bounds():
    table = settings_table.table()
    for name in Settings.model_fields:
        if name not in ("openai_api_key", "gemini_api_key"):  # the provider keys' own names
            assert f"| `MEMORY_{name.upper()}` |" in table
    assert "| `MEMORY_CLAIM_LEASE_S` | formation trigger (§4) | `600` | int, > 0 |" in table
    assert "| `MEMORY_SEARCH_DEFAULT_TOP_K` | search (§6) | `10` | int, ≥ 1, ≤ 50 |" in table
    assert "| `MEMORY_LLM_PROVIDER` | providers (§8) | unset | one of openai, gemini, offline (or unset) |" in table


def test_a_stale_table_is_detected(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "operations.md"
    stale.write_text(f"intro\n{settings_table.START}\n| old |\n{settings_table.END}\nrest\n", encoding="utf-8")
    monkeypatch.setattr(settings_table, "PAGE", stale)
    assert settings_table.main(["--check"]) == 1
    assert settings_table.main(["--write"]) == 0
    text = stale.read_text(encoding="utf-8")
    assert text.startswith("intro\n") and text.endswith("rest\n") and settings_table.main(["--check"]) == 0


def test_the_license_is_an_spdx_expression_with_a_setuptools_that_reads_it():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"
    # a string license needs setuptools 77 (PEP 639); the table form warned on every install
    assert "setuptools>=77" in project["build-system"]["requires"]


def test_beat_schedule_files_are_ignored():
    ignored = (REPO_ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "celerybeat-schedule*" in ignored
