"""The code cites ``docs/design.md`` by section ("design §5.3"): every citation in a Python
file, in the README and in the docs pages must name a numbered heading of that file, and
every path the design names must exist. The settings' sections (``# --- search (§6) ---``)
count as citations too: the settings table of ``docs/operations.md`` shows them to operators.

Other pages are cited by heading (``docs/<page>.md "Heading"``) or by section number
(``docs/<page>.md §n``): every such citation, in code, tests, the Makefile, the README and
the pages, must name a page that exists and a heading (or a bold paragraph lead) on it. The
README and the style document outside the repository are no longer cited as sources."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
README = ROOT / "README.md"
DOCS = ROOT / "docs"
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


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


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
    found = [c for path in [*python_files(), README, *doc_pages()] for c in citations(path, CITATION)]
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


# a page cited by heading, docs/<page>.md "Heading" (the quotes may be escaped inside a string),
# or by section number, docs/<page>.md §n
PAGE_HEADING_CITATION = re.compile(r'\bdocs/([\w/-]+\.md),?\s*\\?"([^"\\\n]+)\\?"')
PAGE_SECTION_CITATION = re.compile(r"\bdocs/([\w/-]+\.md),?\s*((?:§\d+(?:\.\d+)*[,\s-]*)+)")
PAGE_NAMED = re.compile(r"(?<![\w/.-])docs/([\w/-]+\.md)\b")
ANY_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
BOLD_LEAD = re.compile(r"^\s*(?:[-*]\s+)?\*\*(.+?)\.?\*\*", re.MULTILINE)
# what the code cited before the docs site: the README's sections and a style document that was
# never in the repository
OLD_SOURCE = re.compile(r'\bREADME\b,?\s*\(?"|\(README\)|\bREADME\s+"|\(' + "STYLE" + r'\b')


def citing_files() -> list[Path]:
    extra = [ROOT / "Makefile", ROOT / "mkdocs.yml", README]
    return [*python_files(), *[p for p in extra if p.exists()], *doc_pages()]


def _plain(title: str) -> str:
    return re.sub(r"[`*_]", "", title).strip().rstrip(".").casefold()


def page_titles(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [_plain(t) for t in [*ANY_HEADING.findall(text), *BOLD_LEAD.findall(text)]]


def _where(path: Path, text: str, at: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, at) + 1}"


def test_every_cited_page_exists():
    found, missing = 0, []
    for path in citing_files():
        text = path.read_text(encoding="utf-8")
        for match in PAGE_NAMED.finditer(text):
            found += 1
            if not (DOCS / match.group(1)).exists():
                missing.append(f"{_where(path, text, match.start())}: docs/{match.group(1)}")
    assert found > 10, "few docs/ pages named: the pattern no longer matches how code names them"
    assert not missing, "pages named that are not in docs/:\n" + "\n".join(missing)


def test_every_cited_page_heading_exists():
    found, missing = 0, []
    for path in citing_files():
        text = path.read_text(encoding="utf-8")
        for match in PAGE_HEADING_CITATION.finditer(text):
            page, title = DOCS / match.group(1), _plain(match.group(2))
            found += 1
            if not page.exists() or not any(t.startswith(title) for t in page_titles(page)):
                missing.append(f"{_where(path, text, match.start())}: docs/{match.group(1)} has no heading {match.group(2)!r}")
    assert found >= 8, "few 'docs/<page>.md \"Heading\"' citations found: the pattern no longer matches"
    assert not missing, "\n".join(missing)


def test_every_cited_page_section_number_exists():
    missing = []
    for path in citing_files():
        text = path.read_text(encoding="utf-8")
        for match in PAGE_SECTION_CITATION.finditer(text):
            page = DOCS / match.group(1)
            numbers = set(HEADING.findall(page.read_text(encoding="utf-8"))) if page.exists() else set()
            for number in SECTION.findall(match.group(2)):
                if number not in numbers:
                    missing.append(f"{_where(path, text, match.start())}: docs/{match.group(1)} has no section {number}")
    assert not missing, "\n".join(missing)


def test_the_readme_and_the_old_style_document_are_not_cited_as_sources():
    found = [f"{_where(path, text, m.start())}: {m.group(0)!r}"
             for path in [*python_files(), ROOT / "Makefile", *doc_pages()]
             for text in [path.read_text(encoding="utf-8")]
             for m in OLD_SOURCE.finditer(text)]
    assert not found, 'cite the page that holds it now, as docs/<page>.md "Heading":\n' + "\n".join(found)
