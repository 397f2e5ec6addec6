"""The code cites ``docs/design.md`` by section ("design §5.3"): every citation in a Python
file, in the README and in the design itself must name a numbered heading of that file, and
every path the design names must exist. The settings' sections (``# --- search (§6) ---``)
count as citations too: the README's settings table shows them to operators."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
README = ROOT / "README.md"
SETTINGS = ROOT / "schemas" / "settings.py"

HEADING = re.compile(r"^#{2,3}\s+(\d+(?:\.\d+)*)\.?\s+\S", re.MULTILINE)
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
# a citation runs from its document's name to the end of its parenthesis or line, so that
# "(design §9 ``forget-user``, §11 provenance)" and "design §3-§5" cite every number in them
CITATION = re.compile(r"\bdesign\s+§[^)\n]*")
# the product contract the code cited before this file existed; it is not in the repository
OLD_CITATION = re.compile(r"\b" + "SPEC" + r"\s*§[^)\n]*")
SETTINGS_SECTION = re.compile(r"^\s*# --- [^\n]*?\((§[^)]*)\)", re.MULTILINE)
# a path in backquotes: segments joined by "/", or a file name with an extension we ship
NAMED_PATH = re.compile(r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?)`")
PATH_SUFFIXES = (".py", ".md", ".yml", ".yaml", ".toml", ".jsonl")
SKIPPED_DIRS = {"__pycache__", "node_modules", "build", "dist"}


def python_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS
                   and not d.endswith(".egg-info")]
        found += [Path(folder) / f for f in files if f.endswith(".py")]
    return sorted(found)


def headings() -> set[str]:
    return set(HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def citations(path: Path, pattern: re.Pattern) -> list[tuple[str, int, str, str]]:
    """(file, line, citation text, section number) for every section a citation names."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in pattern.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for number in SECTION.findall(match.group(0)):
            found.append((str(path.relative_to(ROOT)), line, match.group(0).strip(), number))
    return found


def unresolved(found, known: set[str]) -> list[str]:
    return [f"{file}:{line}: §{number} in {text!r}" for file, line, text, number in found
            if number not in known]


def test_the_design_has_the_numbered_sections_the_code_cites():
    numbers = HEADING.findall(DESIGN.read_text(encoding="utf-8"))
    assert len(numbers) == len(set(numbers)), f"a section number is used twice: {sorted(numbers)}"
    for number in ("1", "2", "3", "4", "5", "5.1", "5.2", "5.3", "5.4", "5.5", "5.6",
                   "6", "7", "8", "9", "10", "11"):
        assert number in numbers, f"docs/design.md has no heading numbered {number}"


def test_every_design_citation_resolves():
    known = headings()
    found = [c for path in [*python_files(), README, DESIGN] for c in citations(path, CITATION)]
    assert len(found) > 50, "few 'design §' citations found: the pattern no longer matches how code cites"
    missing = unresolved(found, known)
    assert not missing, "\n".join(missing)


def test_design_itself_cites_only_its_own_sections():
    text = DESIGN.read_text(encoding="utf-8")
    missing = sorted(set(SECTION.findall(text)) - headings())
    assert not missing, f"docs/design.md refers to sections it does not have: {missing}"


def test_settings_sections_name_design_sections():
    known = headings()
    found = [(str(SETTINGS.relative_to(ROOT)), SETTINGS.read_text(encoding="utf-8").count("\n", 0, m.start()) + 1,
              m.group(0).strip(), number)
             for m in SETTINGS_SECTION.finditer(SETTINGS.read_text(encoding="utf-8"))
             for number in SECTION.findall(m.group(1))]
    assert found, "no settings section names a design section"
    missing = unresolved(found, known)
    assert not missing, "\n".join(missing)


def test_old_contract_citations_are_gone():
    found = dict.fromkeys(f"{file}:{line}: {text!r}" for path in [*python_files(), README]
                          for file, line, text, _ in citations(path, OLD_CITATION))
    assert not found, "cite docs/design.md as 'design §n' instead:\n" + "\n".join(found)


def named_paths() -> list[str]:
    names = set(NAMED_PATH.findall(DESIGN.read_text(encoding="utf-8")))
    return sorted(n for n in names if "/" in n or n.endswith(PATH_SUFFIXES))


def test_every_path_the_design_names_exists():
    names = named_paths()
    assert len(names) > 20, f"the design names only {names}: the path pattern no longer matches"
    missing = [name for name in names if not (ROOT / name).exists()]
    assert not missing, f"docs/design.md names paths that are not in the repository: {missing}"
