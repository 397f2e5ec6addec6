"""The documentation site builds with ``mkdocs build --strict``: a broken link or anchor, a page
missing from the nav, an unresolved API reference or a ``memoryctl`` command that the parser
cannot render fails the build, and so this test. The README stays a short front page whose
links all land on pages of the site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    # the generated pages hold what their sources name: every memoryctl command, and the facade
    reference = (site / "memoryctl" / "index.html").read_text(encoding="utf-8")
    assert "memoryctl keys create" in reference and "--max-tokens" in reference
    service = (site / "reference" / "service" / "index.html").read_text(encoding="utf-8")
    assert "get_memory_context" in service and "search_facts" in service


def test_the_memoryctl_reference_lists_every_command_of_the_parser():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import memoryctl_reference
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    from ops.cli import build_parser

    page = (ROOT / "docs" / "memoryctl.md").read_text(encoding="utf-8")
    # the page holds the reference as the parser renders it today (readable without the site)
    assert memoryctl_reference.written(page) == page, \
        "docs/memoryctl.md is out of date: run `python docs/hooks/memoryctl_reference.py`"
    [sub] = [a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction"]
    missing = [name for name in sub.choices if f"## memoryctl {name}\n" not in page]
    assert not missing, f"commands without a section: {missing}"


def test_the_readme_is_short_and_its_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LIMIT, "the README grew: move the detail to a page of docs/"
    targets = [t.split("#", 1)[0] for t in LINK.findall(text) if not t.startswith(("http://", "https://"))]
    assert len(targets) >= 10
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
