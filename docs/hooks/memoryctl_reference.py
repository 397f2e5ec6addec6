"""Renders ``docs/memoryctl.md``'s command reference from the real argparse parser
(``ops.cli.build_parser``) at build time, so the reference cannot drift from the commands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

MARKER = "<!-- memoryctl-reference -->"
ROOT = Path(__file__).resolve().parents[2]


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


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - mkdocs hook signature
    if page.file.src_uri != "memoryctl.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/memoryctl.md: the marker {MARKER} is missing")
    return markdown.replace(MARKER, reference())
