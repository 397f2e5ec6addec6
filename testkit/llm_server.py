"""A real local HTTP server that speaks OpenAI's Chat Completions and Embeddings and Gemini's
generateContent, batchEmbedContents and embedContent wire formats, for testing the provider
adapters with their real SDKs and no patching.

    with LLMServer() as server:
        server.script("chat", Answer('```json\\n{"facts": []}\\n```'))
        llm = OpenAILLM.from_settings(Settings(openai_api_key=server.openai_key,
                                               openai_base_url=server.openai_base_url))

It runs on 127.0.0.1 on a free port, one thread per request. It is strict: a request the real
API refuses is refused with that API's status and error body (``testkit.llm_wire`` cites
each rule). Each route (``chat``, ``generate``, ``embed``) answers from its queue of scripted
replies: an ``Answer`` (optionally truncated, with or without usage), an ``Error`` (status,
body, headers), a ``Stall`` (no answer for some seconds) or a ``Trickle`` (an answer sent a
byte at a time over some seconds). ``respond(fn)`` answers chat requests nothing was scripted
for with ``fn(body)``, an ``Answer``, so a benchmark can serve many formations. Embedding routes answer
deterministic vectors when nothing is scripted; the chat routes answer 500 and count the call
in ``unscripted``. Every request is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from testkit import llm_wire as wire


@dataclass(frozen=True)
class Answer:
    text: str
    usage: tuple[int, int] | None = (120, 30)   # (input, output) tokens; None: no usage reported
    truncated: bool = False                     # finish_reason "length" / "MAX_TOKENS"
    thoughts: int = 0                           # Gemini's thoughtsTokenCount (billed as output)
    # the model the answer names: None, the one asked for; else a dated snapshot as the real APIs
    # report it (OpenAI's "model": "gpt-6-luna-2026-09-22", Gemini's "modelVersion")
    model: str | None = None
    delay_s: float = 0.0                        # held this long before answering (a provider's latency)


@dataclass(frozen=True)
class Error:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, refusal: wire.Refusal, headers: dict[str, str] | None = None) -> Error:
        return cls(refusal[0], refusal[1], headers or {})


@dataclass(frozen=True)
class Stall:
    seconds: float                              # hold the request this long, then answer 504


@dataclass(frozen=True)
class Trickle:
    answer: Answer
    seconds: float                              # send the whole answer over this long, a byte at a time:
    # headers at once, then the body byte by byte, so no read ever waits longer than
    # seconds / len(body) and an httpx read timeout never fires (a server that is alive but slow)


Reply = Answer | Error | Stall | Trickle
_TRICKLE = "x-test-trickle-s"                   # carries a Trickle's pace from handle() to the writer

# Real error bodies, for scripting.
# https://platform.openai.com/docs/guides/error-codes/api-errors ("429 - You exceeded your current quota")
INSUFFICIENT_QUOTA = Error.of(wire.openai_error(
    429, "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
    type_="insufficient_quota", code="insufficient_quota"))


def rate_limited(retry_after: str | None = "7") -> Error:
    """OpenAI's 429 for a rate limit, with a Retry-After header."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Error.of(wire.openai_error(429, "Rate limit reached for requests per min (RPM). Please try again in 7s.",
                                      type_="requests", code="rate_limit_exceeded"), headers)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class LLMServer:
    """See the module docstring. ``openai_key``/``gemini_key`` None: no auth (like Ollama)."""

    def __init__(self, *, openai_key: str | None = "sk-test", gemini_key: str = "g-test",
                 json_schema: bool | str = True, embedding_size: int = 768) -> None:
        self.openai_key = openai_key
        self.gemini_key = gemini_key
        # True: take json_schema; else refuse it as that server does (False: "llama.cpp"; see
        # llm_wire.refuses_json_schema for "llama.cpp-500", "vllm" and "openai-model")
        self.json_schema = "llama.cpp" if json_schema is False else json_schema
        self.embedding_size = embedding_size    # native size of models outside OpenAI's table
        self.requests: list[Seen] = []
        self.unscripted = 0
        self._queues: dict[str, deque[Reply]] = {"chat": deque(), "generate": deque(), "embed": deque()}
        self._responder: Any = None
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.in_flight = 0                      # requests being answered right now (stalled or trickling)
        self.hung_up = 0                        # trickled answers the client stopped reading mid-way
        self.trickled = 0                       # trickled answers sent to their last byte
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="llm-test-server", daemon=True)

    def trickles(self) -> tuple[int, int]:
        """(answers not sent to their last byte: still sending or hung up on, answers sent whole),
        read together under the handlers' lock, so a handler finishing between two reads cannot be
        counted twice."""
        with self._lock:
            return self.in_flight + self.hung_up, self.trickled

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> LLMServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._released.set()                    # stalled requests end now
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def script(self, route: str, *replies: Reply) -> LLMServer:
        with self._lock:
            self._queues[route].extend(replies)
        return self

    def respond(self, responder: Any) -> LLMServer:
        """``responder(body) -> Answer`` answers each chat request once its queue is empty."""
        self._responder = responder
        return self

    def bodies(self, path_part: str) -> list[Any]:
        """The JSON bodies of the requests whose path contains ``path_part``."""
        return [seen.body for seen in self.requests if path_part in seen.path]

    # --- routing ---------------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, dict]:
        parsed = urlparse(raw_path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(Seen(method, parsed.path, headers, body))
        path = parsed.path
        if path == "/v1/chat/completions":
            return self._openai(headers, lambda: self._chat(body))
        if path == "/v1/embeddings":
            return self._openai(headers, lambda: self._openai_embeddings(body))
        gemini = next((p for p in ("/v1beta/models/", "/v1/models/") if path.startswith(p)), None)
        if gemini and ":" in path:  # the SDK's API version moved from v1beta to v1
            model, _, action = path.removeprefix(gemini).partition(":")
            key = headers.get("x-goog-api-key") or (parse_qs(parsed.query).get("key") or [None])[0]
            if key != self.gemini_key:
                return _as(wire.gemini_bad_key())
            if action == "generateContent":
                return self._generate(body, model)
            if action == "batchEmbedContents":
                return self._gemini_embeddings(body, model)
            if action == "embedContent":  # one text: the batch rules applied to a batch of one
                single = {"requests": [{"model": f"models/{model}", **(body or {})}]} if isinstance(body, dict) else body
                status, answer, headers = self._gemini_embeddings(single, model)
                if status == 200:
                    answer = {"embedding": answer["embeddings"][0]}
                return status, answer, headers
        return _as(wire.openai_error(404, f"Invalid URL ({method} {path})"))

    def _openai(self, headers: dict[str, str], then: Any) -> tuple[int, dict, dict]:
        # https://platform.openai.com/docs/api-reference/authentication: "Authorization: Bearer KEY"
        if self.openai_key is not None and headers.get("authorization") != f"Bearer {self.openai_key}":
            return _as(wire.openai_error(401, "Incorrect API key provided. You can find your API key at "
                                         "https://platform.openai.com/account/api-keys.", code="invalid_api_key"))
        return then()

    def _chat(self, body: Any) -> tuple[int, dict, dict]:
        refusal = wire.check_chat(body)
        if refusal is None and self.json_schema is not True:
            refusal = wire.refuses_json_schema(self.json_schema, body)
        if refusal is not None:
            return _as(refusal)
        return self._answer("chat", lambda a: wire.chat_completion(
            _cut(a), model=a.model or body["model"], finish_reason="length" if a.truncated else "stop", usage=a.usage),
            body)

    def _generate(self, body: Any, model: str) -> tuple[int, dict, dict]:
        refusal = wire.check_generate(body)
        if refusal is not None:
            return _as(refusal)
        return self._answer("generate", lambda a: wire.gemini_answer(
            _cut(a), model=a.model or model, finish_reason="MAX_TOKENS" if a.truncated else "STOP", usage=a.usage,
            thoughts=a.thoughts))

    def _openai_embeddings(self, body: Any) -> tuple[int, dict, dict]:
        native = wire.OPENAI_EMBEDDING_SIZES.get(body.get("model")) if isinstance(body, dict) else None
        refusal = wire.check_embeddings(body, native)
        if refusal is not None:
            return _as(refusal)
        scripted = self._next("embed")
        if scripted is not None and not isinstance(scripted, Trickle):
            return self._reply_error(scripted)
        pace = {_TRICKLE: str(scripted.seconds)} if isinstance(scripted, Trickle) else {}
        size = body.get("dimensions") or native or self.embedding_size
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        rows = [{"object": "embedding", "index": i, "embedding": wire.vector(t, size)} for i, t in enumerate(texts)]
        tokens = sum(len(t.split()) for t in texts)
        # the API may answer rows in any order: each carries its index
        return 200, {"object": "list", "model": body["model"], "data": rows[::-1],
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, pace

    def _gemini_embeddings(self, body: Any, model: str) -> tuple[int, dict, dict]:
        refusal = wire.check_batch_embed(body, model)
        if refusal is not None:
            return _as(refusal)
        scripted = self._next("embed")
        if scripted is not None:
            return self._reply_error(scripted)
        out = []
        for request in body["requests"]:
            text = "".join(p.get("text", "") for p in request["content"]["parts"])
            out.append({"values": wire.vector(text, request.get("outputDimensionality") or 3072)})
        return 200, {"embeddings": out}, {}

    def _answer(self, route: str, shape: Any, body: Any = None) -> tuple[int, dict, dict]:
        reply = self._next(route)
        if reply is None and route == "chat" and self._responder is not None:
            reply = self._responder(body)
        if reply is None:
            self.unscripted += 1
            return 500, {"error": {"message": f"test server: nothing scripted for {route}", "type": "server_error",
                                   "code": 500, "status": "INTERNAL"}}, {}
        if isinstance(reply, Answer):
            if reply.delay_s:
                self._released.wait(reply.delay_s)
            return 200, shape(reply), {}
        if isinstance(reply, Trickle):
            return 200, shape(reply.answer), {_TRICKLE: str(reply.seconds)}
        return self._reply_error(reply)

    def _reply_error(self, reply: Reply) -> tuple[int, dict, dict]:
        if isinstance(reply, Stall):
            self._released.wait(reply.seconds)
            return 504, {"error": {"message": "stalled", "code": 504, "status": "DEADLINE_EXCEEDED"}}, {}
        if isinstance(reply, Error):
            return reply.status, reply.body, reply.headers
        raise TypeError(f"an embedding route takes an Error, a Stall or a Trickle, not {reply!r}")

    def _next(self, route: str) -> Reply | None:
        with self._lock:
            queue = self._queues[route]
            return queue.popleft() if queue else None


def _as(refusal: wire.Refusal) -> tuple[int, dict, dict]:
    return refusal[0], refusal[1], {}


def _cut(answer: Answer) -> str:
    return answer.text[: max(1, len(answer.text) // 2)] if answer.truncated else answer.text


def _handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            with server._lock:
                server.in_flight += 1
            try:
                self._answer()
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, body, extra = server.handle("POST", self.path, headers, raw)
            trickle_s = float(extra.pop(_TRICKLE, 0) or 0)
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                if not trickle_s:
                    self.wfile.write(data)
                    return
                self.wfile.flush()
                pause = trickle_s / len(data)
                for i in range(len(data)):
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    if server._released.wait(pause):
                        return  # the server is closing
                with server._lock:
                    server.trickled += 1
            except (BrokenPipeError, ConnectionResetError):
                if trickle_s:  # the client gave up (a timeout test): nothing to answer
                    with server._lock:
                        server.hung_up += 1

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler
