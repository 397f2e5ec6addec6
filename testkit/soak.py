"""The soak's layout, its producer's turns and the arithmetic of its figures, shared by
``python -m bench.soak`` and the tests that check them (``tests/reliability/test_soak.py``)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from testkit.procs import REPO_ROOT

#: the LoCoMo development data beside the repository (``shared/`` next to it, or one level up
#: from a worktree)
LOCOMO = next((p / "shared" / "data" / "locomo" / "dev.json" for p in REPO_ROOT.parents[:2]
               if (p / "shared" / "data" / "locomo" / "dev.json").exists()),
              REPO_ROOT.parent / "shared" / "data" / "locomo" / "dev.json")
DEMO = REPO_ROOT / "ops" / "demo_data" / "launch_planning.jsonl"


def compose_workers(path: Path = REPO_ROOT / "docker-compose.yml") -> list[dict]:
    """(name, queues, pool, concurrency) of each ``worker-*`` service, prefork capped at the cores."""
    from testkit.scenarios.checks import load_compose

    out = []
    for name, service in sorted(load_compose(path)["services"].items()):
        if not name.startswith("worker-"):
            continue
        command = service["command"]
        args = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        pool = args[args.index("--pool") + 1]
        concurrency = int(args[args.index("--concurrency") + 1])
        if pool == "prefork":
            concurrency = min(concurrency, os.cpu_count() or 1)
        out.append({"name": name.removeprefix("worker-"), "queues": args[args.index("-Q") + 1].split(","),
                    "pool": pool, "concurrency": concurrency})
    return out


def turns(data: Path) -> list[str]:
    """Message texts in conversation order, from LoCoMo (or the demo's JSONL)."""
    if data.suffix == ".json" and data.exists():
        texts = []
        for conv in json.loads(data.read_text()):
            c = conv["conversation"]
            for key in sorted((k for k in c if k.startswith("session_") and not k.endswith("date_time")),
                              key=lambda k: int(k.split("_")[1])):
                texts.extend(t["text"] for t in c[key] if t.get("text"))
        return texts
    lines = (DEMO if not data.exists() else data).read_text().splitlines()
    return [json.loads(line)["message"]["content"] for line in lines if '"message.added"' in line]


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope per minute of (seconds, value) points."""
    if len(points) < 2:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return None if den == 0 else round(sum((t - mt) * (v - mv) for t, v in points) / den * 60, 3)
