"""A real HTTP receiver of webhooks on loopback, verifying each delivery with the Standard
Webhooks reference library (``standardwebhooks``), as a subscriber's endpoint would. It can
answer a given status for the first N deliveries (a receiver that fails, then recovers)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    webhook_id: str
    payload: dict | None
    verified: bool
    status: int


@dataclass
class Receiver:
    secret: str | None = None            # verify with this one (None: record unverified)
    fail_first: int = 0
    fail_status: int = 503
    received: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver._take(self, body)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hooks"

    def _take(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        headers = {k: v for k, v in handler.headers.items()}
        verified, payload = False, None
        if self.secret is not None:
            try:
                payload = Webhook(self.secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                payload = None
        else:
            payload = json.loads(body)
        with self._lock:
            failing = len(self.received) < self.fail_first
            status = self.fail_status if failing else (204 if verified or self.secret is None else 401)
            self.received.append(Received(headers.get("webhook-id", ""), payload, verified, status))
        handler.send_response(status)
        handler.end_headers()

    def accepted(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
