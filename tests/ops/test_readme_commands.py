"""Every ``memoryctl`` line the docs show is one the real parser takes: a command in a shell
block parses as written, and a synopsis in the text (``memoryctl stats --agent A [--user U]``)
names only options its command has, shows every required one, and brackets none of them.
So the docs cannot drift from the command line again."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from ops.cli import build_parser
from testkit.procs import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:sh|bash|shell)\n(.*?)```", re.S)
SPAN = re.compile(r"`(memoryctl [^`]+)`")
BRACKETED = re.compile(r"\[([^\]]*)\]")
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def shell_lines() -> list[tuple[str, str]]:
    """``(where, line)`` for every line of a shell block that runs memoryctl (continuations joined)."""
    found = []
    for path in DOCS:
        for block in SHELL_BLOCK.findall(path.read_text(encoding="utf-8")):
            joined = block.replace("\\\n", " ")
            for line in joined.splitlines():
                if line.lstrip().startswith("memoryctl "):
                    found.append((_relative(path), line.strip()))
    return found


def synopses() -> list[tuple[str, str]]:
    return [(_relative(path), span) for path in DOCS for span in SPAN.findall(path.read_text(encoding="utf-8"))]


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(command: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {name: action for action in command._actions for name in action.option_strings}


def _subcommand(command: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The innermost parser a synopsis names (``memoryctl keys create --admin``), and the rest."""
    while words:
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if not nested or words[0] not in nested[0].choices:
            break
        command, words = nested[0].choices[words[0]], words[1:]
    return command, words


def test_the_docs_show_memoryctl_lines_to_check():
    assert len(shell_lines()) >= 10 and len(synopses()) >= 10


#: where a shell line's memoryctl command ends (``memoryctl serve --port 8080 &``)
SHELL_OPERATORS = {"&", "&&", "|", "||", ";", ">", ">>", "2>", "<"}


def _command_words(line: str) -> list[str]:
    words = shlex.split(line, comments=True)[1:]
    ends = [i for i, word in enumerate(words) if word in SHELL_OPERATORS]
    return words[: ends[0]] if ends else words


@pytest.mark.parametrize(("where", "line"), shell_lines())
def test_every_memoryctl_line_in_a_shell_block_parses(where, line, capsys):
    try:
        build_parser().parse_args(_command_words(line))
    except SystemExit:
        pytest.fail(f"{where}: `{line}` does not parse: {capsys.readouterr().err.strip()}")


@pytest.mark.parametrize(("where", "span"), synopses())
def test_every_memoryctl_synopsis_matches_its_commands_options(where, span):
    commands = _commands()
    words = span.split()
    for name in words[1].split("|"):
        assert name in commands, f"{where}: `{span}`: memoryctl has no command {name!r}"
        command, rest_words = _subcommand(commands[name], words[2:])
        rest = " ".join(rest_words)
        optional = {o for group in BRACKETED.findall(rest) for o in OPTION.findall(group)}
        shown = set(OPTION.findall(BRACKETED.sub(" ", rest)))
        options = _options(command)
        for option in shown | optional:
            assert option in options, f"{where}: `{span}`: memoryctl {name} has no option {option}"
        for option in optional:
            assert not options[option].required, f"{where}: `{span}`: {option} of memoryctl {name} is required"
        if optional:  # a synopsis, not a fragment: it shows every required option
            required = [a for a in command._actions if a.required and a.option_strings]
            for action in required:
                assert set(action.option_strings) & shown, (
                    f"{where}: `{span}`: memoryctl {name} requires {action.option_strings[0]}")
