"""``make demo``: the whole job on the embedded default, in one process, in under a minute.

- a fresh SQLite store in ``.runtime/demo.db``;
- an in-process Celery worker (``memory://`` broker, ``cache+memory://`` backend) running the
  real tasks: ingest, the formation chain, consolidation;
- the offline LLM and the offline local embedder, or the provider of a key that is set
  (``OPENAI_API_KEY`` / ``GEMINI_API_KEY``);
- the bundled sample (``ops/demo_data/launch_planning.jsonl``: a product launch planned over
  four sessions, one of them a group chat) replayed through the producer API, session by
  session, with a progress bar;
- then the facts, reflections, consolidated blobs, each run's stage timings, the memory
  context assembled for a question ("Where does Maya live now?", facts found for it first)
  and a ``search_facts`` answer to it are printed;
- with ``--trace``, every run's trace (the ingest that claimed it, then each stage with its
  LLM and embedding calls) is written as JSON to ``traces/<run id>.json`` beside the store
  (``.runtime/traces/`` by default); needs the ``otel`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

DATA = Path(__file__).resolve().parent / "demo_data" / "launch_planning.jsonl"
RUNTIME = Path(".runtime")


def load_events(path: Path) -> list[dict]:
    events = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{number}: not JSON ({exc.msg})") from exc
    return events


def sessions_in_order(events: Sequence[dict]) -> list[tuple[str, list[dict]]]:
    """Events grouped per session, sessions in order of first appearance."""
    grouped: dict[str, list[dict]] = {}
    for event in events:
        grouped.setdefault(event["session_id"], []).append(event)
    return list(grouped.items())


def _configure_environment(db_path: Path) -> None:
    """Must run before ``workers.app`` is imported: the app reads its broker at import."""
    os.environ["MEMORY_STORE_URL"] = f"sqlite:///{db_path.resolve()}"
    os.environ["MEMORY_BROKER_URL"] = "memory://localhost/"
    os.environ["MEMORY_RESULT_BACKEND"] = "cache+memory://"
    from schemas.settings import get_settings

    get_settings.cache_clear()


def _fresh_db(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)


def replay(events: Sequence[dict], publisher, *, on_event: Callable[[], None], settle: Callable[[list[str]], None]) -> None:
    """Publish each session's messages one by one through the producer API, end the session
    (the sample's own session.ended, or one made here), and let it settle before the next."""
    from workers.producer import end_session

    done: list[str] = []
    for session_id, session_events in sessions_in_order(events):
        ended = False
        agent_id = session_events[0]["agent_id"]
        for event in session_events:
            if event.get("type") == "session.ended":
                ended = True
            publisher.publish_one(event)
            on_event()
        if not ended:
            end_session(agent_id, session_id, publisher=publisher)
        done.append(session_id)
        settle(done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="a JSONL file of events")
    parser.add_argument("--db", type=Path, default=RUNTIME / "demo.db", help="the SQLite file (recreated)")
    parser.add_argument("--timeout", type=float, default=45.0, help="seconds to wait for each session")
    parser.add_argument("--trace", action="store_true",
                        help="write each run's spans as JSON to traces/ beside the store")
    args = parser.parse_args(argv)

    events = load_events(args.data)
    _fresh_db(args.db)
    _configure_environment(args.db)
    exporter = _tracing() if args.trace else None

    from tqdm import tqdm

    from ops.demo_report import print_report
    from workers.deps import get_deps
    from workers.in_process import running_worker, wait_until_idle
    from workers.producer import CeleryPublisher

    deps = get_deps()
    settings = deps.settings
    deps.store.create_indexes()
    print(f"store: {settings.store_url}")
    print(f"llm: {settings.resolved_llm_provider()}   embedder: {deps.embedder.model}")
    started = time.monotonic()
    late: list[str] = []
    with running_worker() as app:
        publisher = CeleryPublisher(app)
        with tqdm(total=len(events), desc="replaying sample", unit="event", file=sys.stdout) as bar:
            def settle(session_ids: list[str]) -> None:
                if not wait_until_idle(app, deps.store, session_ids, args.timeout):
                    late.append(session_ids[-1])

            replay(events, publisher, on_event=bar.update, settle=settle)
        publisher.close()
    elapsed = time.monotonic() - started
    if late:
        print(f"warning: sessions still forming after {args.timeout:.0f} s: {', '.join(late)}")
    print_report(deps, events, elapsed)
    print(_instructions(events, deps))
    if exporter is not None:
        _write_traces(exporter, deps.store, args.db.parent / "traces")
    print(look_again(settings.store_url, events[0]["agent_id"]))
    print(open_inspector(settings.store_url))
    return 0


def _tracing():
    """The in-memory span exporter ``--trace`` writes from; its install error as the exit."""
    from ops.trace_export import install_memory_exporter
    from pipeline.errors import ConfigurationError

    try:
        return install_memory_exporter()
    except ConfigurationError as exc:
        raise SystemExit(f"error: {exc}") from None


def _write_traces(exporter, store, folder: Path) -> None:
    """Each run's spans as ``<run id>.json`` in ``folder``, replacing an earlier demo's."""
    from ops.trace_export import write_run_traces

    for old in folder.glob("*.json"):
        old.unlink()
    written = write_run_traces(store, exporter, folder)
    print(f"\ntraces: {len(written)} run(s) written to {folder}/<run id>.json")


def _instructions(events: Sequence[dict], deps) -> str:
    """What one Memory Instruction would change in the next run (``ops.demo_instructions``)."""
    from ops.demo_instructions import describe, instruction_effect
    from pipeline.errors import PipelineError

    try:
        return describe(*instruction_effect(events, deps.llm, deps.settings))
    except PipelineError as exc:  # a real provider that is down: the report above stands
        return f"\nMemory Instructions: not shown ({type(exc).__name__}: {exc})"


def look_again(store_url: str, agent_id: str) -> str:
    """The ``memoryctl`` line that reads this demo's store, ready to paste (the store is not in
    the current folder's default ``memory.db``)."""
    import shlex

    from ops.demo_report import CONTEXT_SESSION, CONTEXT_USER

    command = (
        f"MEMORY_STORE_URL={shlex.quote(store_url)} memoryctl context --agent {shlex.quote(agent_id)} "
        f"--session {shlex.quote(CONTEXT_SESSION)} --user {shlex.quote(CONTEXT_USER)}"
    )
    return (
        "\nRead this demo's store again with memoryctl (after `. .venv/bin/activate`; runs, search,\n"
        "stats and forget-user take the same MEMORY_STORE_URL):\n" + command
    )


def open_inspector(store_url: str, port: int = 8765) -> str:
    """The one command that serves the web inspector over this demo's store (a fresh admin
    key behind a one-time link, revoked when it stops; its own worker, since the demo's broker
    lives in memory), and the address it prints."""
    import shlex

    return (
        "\nSee it in a browser (docs/inspector.md): run this, then open the one-time link it prints,\n"
        f"http://127.0.0.1:{port}/ui/login/<code> (Ctrl-C stops it):\n"
        f"MEMORY_BROKER_URL=memory://localhost/ MEMORY_STORE_URL={shlex.quote(store_url)} "
        f".venv/bin/memoryctl ui --port {port}"
    )


if __name__ == "__main__":
    sys.exit(main())
