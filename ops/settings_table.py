"""The settings table of docs/operations.md, every ``MEMORY_*`` setting, generated from ``schemas/settings.py``.

    python -m ops.settings_table            # print the table (Markdown)
    python -m ops.settings_table --write    # replace the table in docs/operations.md
    python -m ops.settings_table --check    # exit 1 when that table is out of date

Each row: the variable, its section (the ``# --- name ---`` header above it), its default, the
values it accepts (type and bounds) and the comment written above the field. Provider keys
keep their usual names (``OPENAI_API_KEY``, ...) and are listed below the table, not in it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

import schemas.settings as settings_module
from schemas.settings import Settings

START = "<!-- settings-table:start (python -m ops.settings_table --write) -->"
END = "<!-- settings-table:end -->"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
_SECTION = re.compile(r"^\s*# --- (.+?) -+\s*$")
_FIELD = re.compile(r"^    (\w+): ")
PROVIDER_KEYS = "provider keys (their usual names, not prefixed)"
_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _comments_and_sections() -> dict[str, tuple[str, str]]:
    """field name -> (section, the comment lines right above it, joined)."""
    out: dict[str, tuple[str, str]] = {}
    section, comment = "", []
    for line in Path(settings_module.__file__).read_text(encoding="utf-8").splitlines():
        header = _SECTION.match(line)
        if header:
            section, comment = header.group(1).strip(), []
            continue
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        field = _FIELD.match(line)
        if field and field.group(1) in Settings.model_fields:
            out[field.group(1)] = (section, " ".join(comment))
        comment = []
    return out


def _default(info) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "(required)"
    else:
        value = info.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (dict, list)):
        return f"`{json.dumps(value)}`"
    if isinstance(value, BaseModel):   # a JSON setting read into a model: what it is set to
        return f"`{value.model_dump_json(exclude_defaults=True)}`"
    return f"`{value}`"


def _kind(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        kinds = [_kind(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" (or unset)" if type(None) in args else "")
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return "JSON object"
    return getattr(annotation, "__name__", str(annotation))


def _accepts(info) -> str:
    kind = _kind(info.annotation)
    bounds = [f"{sign} {getattr(m, attr)}" for m in info.metadata for attr, sign in _BOUNDS if hasattr(m, attr)]
    return kind + (f", {', '.join(bounds)}" if bounds else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def rows() -> list[tuple[str, str, str, str, str]]:
    notes = _comments_and_sections()
    out = []
    for name, info in Settings.model_fields.items():
        section, comment = notes.get(name, ("", ""))
        if section == PROVIDER_KEYS:
            continue  # keys keep their provider's variable names, listed below the table
        out.append((f"`MEMORY_{name.upper()}`", section, _default(info), _accepts(info), comment))
    return out


def table() -> str:
    lines = ["| variable | section | default | accepts | what it does |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows()]
    lines.append("")
    lines.append("Provider keys keep their usual names: `OPENAI_API_KEY`, `GEMINI_API_KEY` (or `GOOGLE_API_KEY`).")
    return "\n".join(lines)


def page_table(text: str) -> str | None:
    """The generated block currently in a page's text, or None when it has no markers."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.settings_table", description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="replace the table in docs/operations.md")
    what.add_argument("--check", action="store_true", help="exit 1 when docs/operations.md's table is out of date")
    args = parser.parse_args(argv)
    generated = table()
    if not (args.write or args.check):
        print(generated)
        return 0
    text = PAGE.read_text(encoding="utf-8")
    current = page_table(text)
    if current is None:
        print(f"{PAGE}: no {START} ... {END} block", file=sys.stderr)
        return 2
    if args.check:
        if current != generated:
            print("docs/operations.md's settings table is out of date: python -m ops.settings_table --write", file=sys.stderr)
            return 1
        return 0
    before, rest = text.split(START, 1)
    PAGE.write_text(f"{before}{START}\n{generated}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
