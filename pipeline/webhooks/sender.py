"""The HTTP port of webhook deliveries, and its adapter over httpx: one POST, a bounded wait,
no redirects followed (a receiver's redirect is an answer, not a new destination)."""

from __future__ import annotations

from typing import Protocol

from pipeline.webhooks.delivery import Answer


class WebhookSender(Protocol):
    def post(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        """Send ``body``; the answer's status, or the error that kept one from coming."""


class HttpSender:
    def __init__(self, timeout_s: float) -> None:
        import httpx

        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False)

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> Answer:
        import httpx

        try:
            response = self._client.post(url, content=body,
                                         headers={**headers, "content-type": "application/json",
                                                  "user-agent": "memory-pipeline-webhooks"})
        except httpx.TimeoutException:
            return Answer(error="timed out")
        except httpx.HTTPError as exc:
            return Answer(error=f"{type(exc).__name__}")
        return Answer(status=response.status_code)

    def close(self) -> None:
        self._client.close()
