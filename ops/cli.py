"""``memoryctl``: the operator and producer command line.

Each module in ``ops/commands/`` adds its sub-commands through ``register(subparsers)``, so
commands live beside the concept they belong to. Errors print one clear line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from pydantic import ValidationError

from pipeline.errors import PipelineError


def build_parser() -> argparse.ArgumentParser:
    import ops.commands

    parser = argparse.ArgumentParser(prog="memoryctl", description="Memory pipeline operations.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(ops.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"ops.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PipelineError as exc:
        print(f"memoryctl {args.command}: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        if exc.title != "Settings":
            raise
        # a bad MEMORY_* variable: say which one and why, without a traceback
        for error in exc.errors(include_url=False):
            name = "MEMORY_" + "_".join(str(p) for p in error["loc"]).upper()
            print(f"memoryctl {args.command}: {name}: {error['msg']}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
