"""``memoryctl``: the operator and producer command line.

Each module in ``ops/commands/`` adds its sub-commands through ``register(subparsers)``, so
commands live beside the concept they belong to. User, configuration and infrastructure errors
print one line each, naming the setting, host or path (``ops.failures``), and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from ops.failures import explain
from schemas.settings import get_settings


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
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - explained below, or raised again
        lines = explain(exc, **_urls(args))
        if lines is None:
            raise  # a programming error: keep its traceback
        for line in lines:
            print(f"memoryctl {args.command}: {line}", file=sys.stderr)
        return 2


def _urls(args: argparse.Namespace) -> dict[str, str | None]:
    """The URLs an error may be about, for naming the host (settings may be what is broken)."""
    try:
        settings = get_settings()
        store_url, broker_url = settings.store_url, settings.broker_url
    except Exception:  # noqa: BLE001 - a bad setting is itself the error being explained
        store_url = broker_url = None
    return {"store_url": store_url, "broker_url": broker_url, "source_url": getattr(args, "source_url", None)}


if __name__ == "__main__":
    sys.exit(main())
