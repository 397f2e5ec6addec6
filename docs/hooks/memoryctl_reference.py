"""``docs/memoryctl.md``'s command reference, rendered from the real argparse parser
(``ops.cli.build_parser``). The rendered text is kept in the page itself, between two markers,
so it reads on any Markdown viewer; ``python docs/hooks/memoryctl_reference.py`` rewrites it,
and the site build (this module is also its hook) fails while it differs from the parser's, so
the reference cannot drift from the commands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

BEGIN = "<!-- memoryctl-reference: written by `python docs/hooks/memoryctl_reference.py`; do not edit -->"
END = "<!-- /memoryctl-reference -->"
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "memoryctl.md"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The one-line help each sub-command was registered with."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {c.dest: c.help or "" for c in actions[0]._choices_actions} if actions else {}


def _sections(parser: argparse.ArgumentParser, words: list[str], level: int) -> list[str]:
    out = []
    summaries = _summaries(parser)
    for name, command in _subparsers(parser).items():
        path = [*words, name]
        out.append(f"{'#' * level} memoryctl {' '.join(path)}\n")
        if summaries.get(name):
            out.append(f"{summaries[name]}\n")
        out.append(f"```text\n{command.format_help().rstrip()}\n```\n")
        out += _sections(command, path, min(level + 1, 4))
    return out


def reference() -> str:
    """The reference in Markdown: one section per command, its help as argparse prints it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from ops.cli import build_parser

    # argparse wraps to the terminal's width: the page must not depend on who builds it
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return "\n".join(_sections(build_parser(), [], 2))
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _split(markdown: str) -> tuple[str, str, str]:
    """(before, the reference as the page holds it, after)."""
    if BEGIN not in markdown or END not in markdown:
        raise ValueError(f"docs/memoryctl.md: the markers {BEGIN} and {END} are missing")
    head, rest = markdown.split(BEGIN, 1)
    held, tail = rest.split(END, 1)
    return head, held.strip("\n"), tail


def written(markdown: str) -> str:
    """``markdown`` with the reference between its markers rendered afresh."""
    head, _, tail = _split(markdown)
    return f"{head}{BEGIN}\n\n{reference()}\n{END}{tail}"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - mkdocs hook signature
    if page.file.src_uri == "memoryctl.md" and _split(markdown)[1] != reference().strip("\n"):
        raise ValueError("docs/memoryctl.md: the command reference differs from memoryctl's parser; "
                         "run `python docs/hooks/memoryctl_reference.py` to rewrite it")
    return markdown


if __name__ == "__main__":
    PAGE.write_text(written(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the command reference into {PAGE.relative_to(ROOT)}")
