"""The LLM port: one structured call, validated against its pydantic answer model.

Real providers send ``system`` and ``prompt``; the offline and scripted providers read the
structured ``inputs`` the prompt was built from, so they never parse prose. Every adapter
raises from ``pipeline.errors`` only: ``RateLimited``/``TransientError`` for timeouts, 429 and
5xx, ``InvalidLLMAnswer`` for an answer that does not validate, ``PermanentError`` for auth
and bad requests.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class LLMRequest(Generic[T]):
    operation: str                 # "extract_facts", "decide_facts", "extract_reflections", "consolidate"
    model: str
    system: str
    prompt: str
    response_model: type[T]
    inputs: dict[str, Any] = field(default_factory=dict)
    # None: the provider's timeout for the model's tier (MEMORY_LLM_TIMEOUT_{FAST,FREE,PREMIUM}_S)
    timeout_s: float | None = None


@dataclass(frozen=True)
class LLMResponse(Generic[T]):
    parsed: T
    model: str                     # the model asked for: usage and cost are counted under it
    provider: str
    input_tokens: int = 0
    output_tokens: int = 0
    raw: str = ""
    # how the answer was held to its schema: json_schema, json_object or prompt ("" for the
    # offline and scripted providers, which build answers themselves); recorded on the run
    structured_output: str = ""
    # the model version the provider says answered (OpenAI's dated snapshot such as
    # gpt-6-luna-2026-09-22, Gemini's modelVersion); "" when it reported none. Kept beside the
    # usage, never priced: price tables are keyed by the names users configure
    snapshot: str = ""


DEFAULT_TIMEOUT_S = 60.0


class LLM(abc.ABC):
    provider: str = "abstract"

    def timeout_for(self, request: LLMRequest[Any]) -> float:
        """The seconds this call may take: the request's own, else the adapter's for its model."""
        return request.timeout_s if request.timeout_s is not None else DEFAULT_TIMEOUT_S

    @abc.abstractmethod
    def complete(self, request: LLMRequest[T]) -> LLMResponse[T]:
        """One call; the answer is validated against ``request.response_model``."""
