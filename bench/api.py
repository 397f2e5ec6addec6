"""What HTTP costs: a cached memory context and a search over the API against the same calls
in process, in one run.

    python -m bench.api [--workers 1 2] [--clients 16 64] [--seconds 5] [--store PATH] [--json]

Setup: a store formed by the demo (``python -m ops.demo``, the bundled conversation, shipped
defaults: offline LLM, the local embedder) unless ``--store`` names one; an agent key made in it.
Three calls, as an agent runtime makes them before a reply:
- ``context``: ``GET /v1/agents/agent-juniper/sessions/s3-maya-followup/context?user_id=user-maya``,
  served from the session's cache (the first call builds it);
- ``search``: ``POST .../search`` with "Where does Maya live now?";
- ``mcp_context``: the same cached context as the MCP tool ``get_memory_context``, one JSON-RPC
  POST to ``/mcp`` (user and session in the runtime's headers), compared with ``context`` in process.

In process: the same ``MemoryService`` call, built as the app builds it (``workers.deps.Deps``),
one after the other in one thread. Over HTTP: ``memoryctl serve --workers W`` (uvicorn), with
``bench.api_load`` in its own process sending from 1 (the latency HTTP adds), 16 and 64
keep-alive connections. The generator shares the two cores with the server, so each figure
has its ratio to the in-process call beside it. The rate limit is off
(``MEMORY_API_RATE_LIMIT_PER_MINUTE=0``): its default (600 a minute per key) would be what is
measured; every other setting is the shipped default, printed with the figures.

Aims (issue 23): HTTP adds at most 1 ms p50 to a cached context; a cached context serves at
least 2,000 requests/s with 2 workers on 2 cores. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.api_load import percentile

AGENT, SESSION, USER = "agent-juniper", "s3-maya-followup", "user-maya"
QUERY = "Where does Maya live now?"
REPO = Path(__file__).resolve().parents[1]
# the same cached context as an MCP tool call at /mcp (stateless JSON-RPC, one POST per call)
MCP_CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "get_memory_context", "arguments": {}}})
MCP_HEADERS = [f"X-Memory-User: {USER}", f"X-Memory-Session: {SESSION}", "Accept: application/json, text/event-stream"]
IN_PROCESS_TWIN = {"mcp_context": "context"}


def form_store(folder: Path) -> Path:
    """The demo's store, formed with the shipped defaults."""
    db = folder / "demo.db"
    done = subprocess.run([sys.executable, "-m", "ops.demo", "--db", str(db)], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"bench.api: the demo did not form its store:\n{done.stderr[-2000:]}")
    return db


def in_process(store_url: str, seconds: float) -> dict:
    """Each call one after the other in this thread, for ``seconds`` each: latency and rate."""
    os.environ["MEMORY_STORE_URL"] = store_url
    from schemas.settings import get_settings

    get_settings.cache_clear()
    from workers.client import memory_service
    from workers.deps import Deps

    settings = get_settings()
    deps = Deps(settings)
    service = memory_service(AGENT, settings=settings, store=deps.store, search=deps.search,
                             embedder=deps.embedder, clock=deps.clock)
    calls = {
        "context": lambda: service.get_memory_context(session_id=SESSION, user_id=USER),
        "search": lambda: service.search_facts(QUERY, session_id=SESSION, user_id=USER),
    }
    out = {"embedder": deps.embedder.model, "llm": settings.resolved_llm_provider()}
    for name, call in calls.items():
        assert call(), f"{name} found nothing in the store"  # builds the cache and loads the models
        latencies = []
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            began = time.perf_counter()
            call()
            latencies.append(time.perf_counter() - began)
        ordered = sorted(latencies)
        out[name] = {"requests": len(ordered), "requests_per_s": round(len(ordered) / sum(ordered), 1),
                     "p50_ms": round(percentile(ordered, 0.5) * 1000, 3),
                     "p95_ms": round(percentile(ordered, 0.95) * 1000, 3)}
    deps.store.close()
    return out


def _agent_key(store_url: str) -> str:
    from datetime import datetime, timezone

    from usecases.keys import create_key
    from pipeline.store import open_store
    from schemas.settings import Settings

    store = open_store(Settings(store_url=store_url))
    try:
        return create_key(store.access, "agent", datetime.now(timezone.utc), agent_id=AGENT, label="bench.api")[0]
    finally:
        store.close()


def _serve(store_url: str, workers: int, port: int, log: Path) -> subprocess.Popen:
    # the settings of this run (embedder, ...) as in process; only the store and the limit are set here
    env = {**os.environ, "MEMORY_STORE_URL": store_url, "MEMORY_API_RATE_LIMIT_PER_MINUTE": "0"}
    memoryctl = Path(sys.executable).parent / "memoryctl"
    command = [str(memoryctl)] if memoryctl.exists() else [sys.executable, "-m", "ops.cli"]
    proc = subprocess.Popen([*command, "serve", "--port", str(port), "--workers", str(workers), "--no-access-log",
                             "--log-level", "warning"], env=env, cwd=REPO, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"bench.api: memoryctl serve exited:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    _stop(proc)
    raise SystemExit("bench.api: memoryctl serve did not answer /healthz within 90 s")


def _stop(proc: subprocess.Popen) -> None:
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _answers(url: str, key: str, body: str | None, headers) -> None:
    """One call answered as it should be (the generator checks the status only; an MCP tool
    error is a 200 too)."""
    request = urllib.request.Request(url, data=body.encode() if body else None, method="POST" if body else "GET",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                                              **dict(h.split(": ", 1) for h in headers)})
    with urllib.request.urlopen(request, timeout=60) as answer:
        text = answer.read().decode()
    if "Maya" not in text or '"isError":true' in text.replace(" ", ""):
        raise SystemExit(f"bench.api: {url} answered without the memory asked for: {text[:300]}")


def load(url: str, key: str, body: str | None, clients: int, seconds: float, warmup: float,
         headers: list[str] = ()) -> dict:
    """One point from ``bench.api_load`` in its own process, with the load average after it."""
    command = [sys.executable, "-m", "bench.api_load", "--url", url, "--header", f"Authorization: Bearer {key}",
               "--clients", str(clients), "--seconds", str(seconds), "--warmup", str(warmup)]
    for header in headers:
        command += ["--header", header]
    if body is not None:
        command += ["--body", body]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=seconds + warmup + 120)
    if done.returncode != 0:
        raise SystemExit(f"bench.api: the load generator failed: {done.stderr.strip()[-1000:]}")
    point = json.loads(done.stdout.strip().splitlines()[-1])
    point["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="uvicorn worker counts")
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64], help="concurrent connections")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per point")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each point")
    parser.add_argument("--store", type=Path, default=None, help="a formed SQLite store (default: form the demo's)")
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        folder = Path(tmp)
        db = args.store.resolve() if args.store else form_store(folder)
        store_url = f"sqlite:///{db}"
        key = _agent_key(store_url)
        log = lambda *a: None if args.json else print(*a, file=sys.stderr, flush=True)  # noqa: E731
        log(f"store {store_url}; in-process calls for {args.seconds:g} s each")
        local = in_process(store_url, args.seconds)
        result: dict = {"store": str(db), "settings": {
            "embedder": local.pop("embedder"), "llm": local.pop("llm"), "rate_limit_per_minute": 0,
            "seconds_per_point": args.seconds, "warmup_s": args.warmup}, "in_process": local, "http": {}}
        for workers in args.workers:
            port = _free_port()
            server = _serve(store_url, workers, port, folder / f"serve-{workers}.log")
            base = f"http://127.0.0.1:{port}/v1/agents/{AGENT}/sessions/{SESSION}"
            targets = {"context": (f"{base}/context?user_id={USER}", None, []),
                       "search": (f"{base}/search", json.dumps({"query": QUERY, "user_id": USER}), []),
                       "mcp_context": (f"http://127.0.0.1:{port}/mcp", MCP_CALL, MCP_HEADERS)}
            try:
                for name, (url, body, headers) in targets.items():
                    same = IN_PROCESS_TWIN.get(name, name)
                    _answers(url, key, body, headers)
                    for clients in [1, *args.clients]:
                        log(f"{workers} worker(s), {name}, {clients} client(s)")
                        point = load(url, key, body, clients, args.seconds, args.warmup, headers)
                        point["throughput_vs_in_process"] = round(
                            point["requests_per_s"] / local[same]["requests_per_s"], 3)
                        point["p50_vs_in_process"] = round(point["p50_ms"] / local[same]["p50_ms"], 2)
                        result["http"].setdefault(f"workers_{workers}", {}).setdefault(name, {})[
                            f"clients_{clients}"] = point
            finally:
                _stop(server)
    result["aims"] = _aims(result, args)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if not args.json:
        _print_table(result)
    print(json.dumps(result))
    return 0


def _aims(result: dict, args) -> dict:
    """The issue's two aims, read off the figures (None where the run did not measure them)."""
    one = result["http"].get(f"workers_{min(args.workers)}", {}).get("context", {}).get("clients_1")
    two = result["http"].get("workers_2", {}).get("context", {})
    best = max((p["requests_per_s"] for p in two.values()), default=None)
    added = round(one["p50_ms"] - result["in_process"]["context"]["p50_ms"], 3) if one else None
    return {"http_added_p50_ms_cached_context": added, "added_at_most_1_ms": added is not None and added <= 1.0,
            "cached_context_rps_2_workers": best, "at_least_2000_rps": best is not None and best >= 2000}


def _print_table(result: dict) -> None:
    local = result["in_process"]
    for name in ("context", "search"):
        print(f"in process  {name:8} p50 {local[name]['p50_ms']:8.3f} ms  p95 {local[name]['p95_ms']:8.3f} ms  "
              f"{local[name]['requests_per_s']:9.1f}/s")
    for workers, calls in result["http"].items():
        for name, points in calls.items():
            for clients, p in points.items():
                print(f"{workers:9}  {name:8} {clients:10} p50 {p['p50_ms']:8.3f} ms  p95 {p['p95_ms']:8.3f} ms  "
                      f"{p['requests_per_s']:9.1f}/s (x{p['throughput_vs_in_process']} of in-process)  "
                      f"errors {p['errors']}  load {p['load_average'][0]}")
    print(f"aims: {result['aims']}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
