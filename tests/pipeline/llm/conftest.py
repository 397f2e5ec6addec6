"""A recording mock HTTP transport: the real SDK clients run, no network is touched."""

from __future__ import annotations

import json

import httpx
import pytest


class Recorder:
    """Answers each request with the next scripted response and keeps what was sent."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.responses: list = []

    def reply(self, *responses) -> Recorder:
        self.responses.extend(responses)
        return self

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        return response

    @property
    def body(self) -> dict:
        return json.loads(self.requests[-1].content)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
