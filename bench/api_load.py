"""The load generator of ``bench.api``, in its own process: C keep-alive HTTP/1.1 connections on
asyncio streams, each sending one request after the other for a fixed time, every answer read
whole (Content-Length) and its status checked.

    python -m bench.api_load --url http://127.0.0.1:8080/v1/... --clients 16 --seconds 5 \
        [--header 'Authorization: Bearer ...'] [--body '{"query": "..."}'] [--warmup 1]

Prints one JSON object: requests, errors (non-200 answers), seconds, requests/s and latency
percentiles in ms. Plain asyncio streams rather than an HTTP client library: the generator shares
the cores with the server, so it should spend as little of them as it can.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urlsplit


class LoadError(Exception):
    """An answer the generator cannot read (no Content-Length, a closed connection)."""


def build_request(url: str, headers: list[str], body: str | None) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    method = "POST" if body is not None else "GET"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.netloc}", *headers]
    payload = (body or "").encode()
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return parts.hostname, parts.port or 80, ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    writer.write(request)
    status = await reader.readline()
    if not status:
        raise LoadError("the server closed the connection")
    length = None
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        elif name.strip().lower() == b"transfer-encoding":
            raise LoadError("chunked answers are not read by this generator")
    if length is None:
        raise LoadError("an answer without Content-Length")
    await reader.readexactly(length)
    return int(status.split()[1])


async def _connection(host: str, port: int, request: bytes, window: dict, warmed: asyncio.Barrier,
                      latencies: list[float], errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        await _exchange(reader, writer, request)  # the server's first answer on it is never counted
        await warmed.wait()
        while True:
            began = time.perf_counter()
            if began >= window["stop"]:
                return
            code = await _exchange(reader, writer, request)
            if began >= window["start"]:  # answers during the warm-up are not counted
                latencies.append(time.perf_counter() - began)
                if code != 200:
                    errors.append(code)
    finally:
        writer.close()


async def run(url: str, headers: list[str], body: str | None, clients: int, seconds: float,
              warmup: float) -> dict:
    """Every connection answers once, then ``warmup`` seconds pass uncounted, then ``seconds``
    are measured."""
    host, port, request = build_request(url, headers, body)
    latencies: list[float] = []
    errors: list[int] = []
    window = {"start": float("inf"), "stop": float("inf")}
    warmed = asyncio.Barrier(clients + 1)
    tasks = [asyncio.create_task(_connection(host, port, request, window, warmed, latencies, errors))
             for _ in range(clients)]
    try:
        await asyncio.wait_for(warmed.wait(), 120)
    except TimeoutError:
        failed = [t.exception() for t in tasks if t.done() and t.exception()]
        raise (failed[0] if failed else LoadError("the connections did not all answer within 120 s")) from None
    window["start"] = time.perf_counter() + warmup
    window["stop"] = window["start"] + seconds
    await asyncio.gather(*tasks)
    return summary(latencies, errors, seconds, clients)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def summary(latencies: list[float], errors: list[int], seconds: float, clients: int) -> dict:
    ordered = sorted(latencies)
    ms = lambda q: round(percentile(ordered, q) * 1000, 3)  # noqa: E731
    return {"clients": clients, "requests": len(ordered), "errors": len(errors),
            "error_statuses": sorted(set(errors)), "seconds": seconds,
            "requests_per_s": round(len(ordered) / seconds, 1),
            "p50_ms": ms(0.5), "p95_ms": ms(0.95), "p99_ms": ms(0.99)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api_load", description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--header", action="append", default=[], help="'Name: value'; repeat")
    parser.add_argument("--body", default=None, help="a JSON body: the request is then a POST")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(run(args.url, args.header, args.body, args.clients, args.seconds, args.warmup))
    except (OSError, LoadError, asyncio.IncompleteReadError) as exc:
        print(f"bench.api_load: {args.url}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
